// The image a Kafka 3.9 observer builds from a metadata log directory, computed by Kafka's own classes.
//
// What Kafka's leader hands a new observer (ReplicatedLog.validateOffsetAndEpoch): with its log start
// (the first segment's base offset) at 0, the records from offset 0; otherwise the latest snapshot, then
// the records after it. Records are given to Kafka's MetadataBatchLoader as one handleCommit (one
// BatchReader of everything committed, as MetadataLoader.handleCommit gets it after a catch-up), then
// flushed once; a snapshot is loaded as MetadataLoader.handleLoadSnapshot does (one delta on the empty
// image). Prints the resulting topics and config keys (never values), one per line, for the test to compare.
//
// Usage: java -cp <kafka libs>:<dir> KafkaImage <__cluster_metadata-0 directory>

import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.utils.BufferSupplier;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.image.ConfigurationImage;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;
import org.apache.kafka.image.TopicImage;
import org.apache.kafka.image.loader.MetadataBatchLoader;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.raft.Batch;
import org.apache.kafka.raft.LeaderAndEpoch;
import org.apache.kafka.raft.internals.RecordsIterator;
import org.apache.kafka.server.common.ApiMessageAndVersion;

import java.io.File;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

public class KafkaImage {
    private static MetadataImage current = MetadataImage.EMPTY;

    private static RecordsIterator<ApiMessageAndVersion> batches(File file) throws Exception {
        return new RecordsIterator<>(FileRecords.open(file), MetadataRecordSerde.INSTANCE,
            BufferSupplier.create(), 8 * 1024 * 1024, true);
    }

    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        File[] segments = dir.listFiles((d, n) -> n.endsWith(".log"));
        File[] snapshots = dir.listFiles((d, n) -> n.endsWith(".checkpoint"));
        Arrays.sort(segments);
        Arrays.sort(snapshots);
        long logStart = segments.length == 0 ? 0 : Long.parseLong(segments[0].getName().substring(0, 20));
        long from = 0;
        MetadataBatchLoader loader = new MetadataBatchLoader(new LogContext(), Time.SYSTEM,
            (msg, cause) -> new RuntimeException(msg, cause), (delta, image, manifest) -> current = image);
        if (logStart > 0 || (segments.length == 0 && snapshots.length > 0)) {
            File snap = snapshots[snapshots.length - 1];
            from = Long.parseLong(snap.getName().substring(0, 20));
            MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
            int epoch = Integer.parseInt(snap.getName().substring(21, 31));
            try (RecordsIterator<ApiMessageAndVersion> it = batches(snap)) {
                while (it.hasNext()) {
                    for (ApiMessageAndVersion r : it.next().records()) delta.replay(r.message());
                }
            }
            current = delta.apply(new MetadataProvenance(from - 1, epoch, 0));
            loader.resetToImage(current);
        }
        for (File seg : segments) {
            try (RecordsIterator<ApiMessageAndVersion> it = batches(seg)) {
                while (it.hasNext()) {
                    Batch<ApiMessageAndVersion> b = it.next();
                    if (b.lastOffset() >= from) loader.loadBatch(b, LeaderAndEpoch.UNKNOWN);
                }
            }
        }
        loader.maybeFlushBatches(LeaderAndEpoch.UNKNOWN);
        System.out.println("log_start " + logStart + " from " + from);
        List<String> lines = new ArrayList<>();
        for (Map.Entry<String, TopicImage> e : current.topics().topicsByName().entrySet()) {
            lines.add("topic " + e.getKey() + " " + e.getValue().partitions().size());
        }
        for (Map.Entry<ConfigResource, ConfigurationImage> e : current.configs().resourceData().entrySet()) {
            for (Map.Entry<String, String> c : new TreeMap<>(e.getValue().toMap()).entrySet()) {
                lines.add("config " + e.getKey().type() + " " + e.getKey().name() + " " + c.getKey());
            }
        }
        lines.sort(null);
        for (String l : lines) System.out.println(l);
    }
}
