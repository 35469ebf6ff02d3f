import Foundation
import NIOHTTP1
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Creates that share a transaction are answered only once it is durable:
/// kill -9 in the middle of a stream of them loses none that was answered.
@Suite struct GroupCommitProcessTests {
    @Test(.timeLimit(.minutes(2))) func noAnsweredCreateIsLostToKillDashNineUnderLoad() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("countersign-group-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = folder.appendingPathComponent("countersign.sqlite").path
        let log = folder.appendingPathComponent("daemon.log")
        let raised = [
            "--database", database, "--request-ttl", "3600", "--rate-limit", "resetInitiatePerIP=1000000/60",
            "--rate-limit", "statusPollsPerIP=1000000/60",
        ]
        let port = try DaemonProcessTests.freePort()
        let daemon = try await MailDeliveryProcessTests.startDaemon(raised, port: port, log: log)
        defer { if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) } }

        // 16 requesters create without pause; the daemon is killed once 200 answers have come back.
        final class Answered: Sendable { let ids = Mutex<[String]>([]) }
        let answered = Answered()
        let pid = daemon.processIdentifier
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<16 {
                group.addTask {
                    var index = 0
                    while true {
                        index += 1
                        let body = #"{"email":"load-\#(worker)-\#(index)@example.com","newPassword":"staple orbit lantern"}"#
                        guard
                            let (status, answer) = try? await DaemonProcessTests.http(
                                .POST, "http://127.0.0.1:\(port)/api/mobile/auth/reset/phone/initiate", json: body, timeout: 10),
                            status == 200, let id = answer["requestId"] as? String
                        else { return }  // the daemon is gone
                        let count = answered.ids.withLock {
                            $0.append(id)
                            return $0.count
                        }
                        if count == 200 { kill(pid, SIGKILL) }
                    }
                }
            }
        }
        daemon.waitUntilExit()
        #expect(daemon.terminationReason == .uncaughtSignal)
        let acknowledged = answered.ids.withLock { $0 }
        #expect(acknowledged.count >= 200)

        // Restarted on the same file: every answered request is there, still pending.
        let again = try DaemonProcessTests.freePort()
        let restarted = try await MailDeliveryProcessTests.startDaemon(raised, port: again, log: log)
        defer { kill(restarted.processIdentifier, SIGKILL) }
        var missing: [String] = []
        for id in acknowledged {
            let (status, answer) = try await DaemonProcessTests.http(.GET, "http://127.0.0.1:\(again)/api/mobile/auth/reset/phone/status/\(id)")
            if status != 200 || answer["status"] as? String != "pending" { missing.append(id) }
        }
        #expect(missing.isEmpty, "\(missing.count) of \(acknowledged.count) answered creates were lost")
    }
}
