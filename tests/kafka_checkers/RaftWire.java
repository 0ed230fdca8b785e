// Kafka 3.9's own protocol classes on the voter APIs' bytes: what Kafka reads from a frame zk2kraft
// wrote, and the frames Kafka's KafkaRaftClient builds (RaftUtil) for zk2kraft to read.
//
// Usage: java -cp <kafka libs>:<dir> RaftWire request <file>                  (prints Kafka's reading)
//        java -cp <kafka libs>:<dir> RaftWire response <apiKey> <version> <file>
//        java -cp <kafka libs>:<dir> RaftWire build <vote|begin|end> <version> <file>
// Frames are without their size prefix.

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.BeginQuorumEpochRequest;
import org.apache.kafka.common.requests.EndQuorumEpochRequest;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.ResponseHeader;
import org.apache.kafka.common.requests.VoteRequest;
import org.apache.kafka.raft.Endpoints;
import org.apache.kafka.raft.RaftUtil;
import org.apache.kafka.raft.ReplicaKey;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Collections;

public class RaftWire {
    private static final TopicPartition TP = new TopicPartition("__cluster_metadata", 0);

    public static void main(String[] args) throws Exception {
        if (args[0].equals("request")) {
            ByteBuffer buf = ByteBuffer.wrap(Files.readAllBytes(Paths.get(args[1])));
            RequestHeader header = RequestHeader.parse(buf);
            AbstractRequest req = AbstractRequest.parseRequest(header.apiKey(), header.apiVersion(), buf).request;
            if (buf.hasRemaining()) throw new IllegalStateException(buf.remaining() + " bytes after the body");
            System.out.println(header.correlationId() + " " + req.data());
        } else if (args[0].equals("response")) {
            ApiKeys api = ApiKeys.forId(Integer.parseInt(args[1]));
            short version = Short.parseShort(args[2]);
            ByteBuffer buf = ByteBuffer.wrap(Files.readAllBytes(Paths.get(args[3])));
            ResponseHeader header = ResponseHeader.parse(buf, api.responseHeaderVersion(version));
            AbstractResponse resp = AbstractResponse.parseResponse(api, buf, version);
            if (buf.hasRemaining()) throw new IllegalStateException(buf.remaining() + " bytes after the body");
            System.out.println(header.correlationId() + " " + resp.data());
        } else {
            short version = Short.parseShort(args[2]);
            Endpoints leader = Endpoints.fromInetSocketAddresses(Collections.singletonMap(
                new org.apache.kafka.common.network.ListenerName("CONTROLLER"), InetSocketAddress.createUnresolved("h2", 9102)));
            AbstractRequest request;
            if (args[1].equals("vote")) {
                request = new VoteRequest.Builder(RaftUtil.singletonVoteRequest(TP, "c1", 7,
                    ReplicaKey.of(2, Uuid.ONE_UUID), ReplicaKey.of(3, ReplicaKey.NO_DIRECTORY_ID), 6, 120)).build(version);
            } else if (args[1].equals("begin")) {
                request = new BeginQuorumEpochRequest.Builder(RaftUtil.singletonBeginQuorumEpochRequest(TP, "c1", 7, 2,
                    leader, ReplicaKey.of(3, ReplicaKey.NO_DIRECTORY_ID))).build(version);
            } else {
                request = new EndQuorumEpochRequest.Builder(RaftUtil.singletonEndQuorumEpochRequest(TP, "c1", 7, 2,
                    Arrays.asList(ReplicaKey.of(3, ReplicaKey.NO_DIRECTORY_ID), ReplicaKey.of(1, ReplicaKey.NO_DIRECTORY_ID)))).build(version);
            }
            ByteBuffer out = request.serializeWithHeader(new RequestHeader(request.apiKey(), version, "kafka", 42));
            byte[] bytes = new byte[out.remaining()];
            out.get(bytes);
            Files.write(Paths.get(args[3]), bytes);
        }
    }
}
