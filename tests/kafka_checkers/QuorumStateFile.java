// Kafka 3.9's own FileQuorumStateStore on a `quorum-state` file: what Kafka writes for an election
// state, and what it reads back from a file zk2kraft wrote.
//
// Usage: java -cp <kafka libs>:<dir> QuorumStateFile write <file> <kraft.version 0|1> <epoch> <leader|-1>
//            <voted|-1> <voted directory id|-> <voter,voter,...>
//        java -cp <kafka libs>:<dir> QuorumStateFile read <file>
// `read` prints one line: epoch=<n> leader=<id|-1> voted=<id|-1> votedDirectory=<uuid|-> then the
// ElectionState as Kafka renders it (which names the voters of a version 0 file).

import org.apache.kafka.common.Uuid;
import org.apache.kafka.raft.ElectionState;
import org.apache.kafka.raft.FileQuorumStateStore;
import org.apache.kafka.raft.ReplicaKey;
import org.apache.kafka.server.common.KRaftVersion;

import java.io.File;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

public class QuorumStateFile {
    public static void main(String[] args) {
        FileQuorumStateStore store = new FileQuorumStateStore(new File(args[1]));
        if (args[0].equals("read")) {
            Optional<ElectionState> read = store.readElectionState();
            if (!read.isPresent()) {
                System.out.println("absent");
                return;
            }
            ElectionState e = read.get();
            String voted = e.hasVoted() ? String.valueOf(e.votedKey().id()) : "-1";
            String dir = e.hasVoted() && e.votedKey().directoryId().isPresent()
                ? e.votedKey().directoryId().get().toString() : "-";
            System.out.println("epoch=" + e.epoch() + " leader=" + e.leaderIdOrSentinel() + " voted=" + voted
                + " votedDirectory=" + dir + " " + e);
            return;
        }
        KRaftVersion version = args[2].equals("0") ? KRaftVersion.KRAFT_VERSION_0 : KRaftVersion.KRAFT_VERSION_1;
        int epoch = Integer.parseInt(args[3]);
        int leader = Integer.parseInt(args[4]);
        int voted = Integer.parseInt(args[5]);
        Uuid dir = args[6].equals("-") ? ReplicaKey.NO_DIRECTORY_ID : Uuid.fromString(args[6]);
        Set<Integer> voters = new TreeSet<>();
        for (String v : args[7].split(",")) {
            if (!v.isEmpty()) voters.add(Integer.parseInt(v));
        }
        ElectionState state;
        if (voted >= 0) {
            state = ElectionState.withVotedCandidate(epoch, ReplicaKey.of(voted, dir), voters);
        } else if (leader >= 0) {
            state = ElectionState.withElectedLeader(epoch, leader, voters);
        } else {
            state = ElectionState.withUnknownLeader(epoch, voters);
        }
        store.writeElectionState(state, version);
    }
}
