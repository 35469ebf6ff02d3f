import CountersignRuntime
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite struct SystemdNotifierTests {
    @Test func messagesReachPathAndAbstractSockets() async throws {
        let folder = try makeTemporaryFolder("countersign-notify")
        defer { try? FileManager.default.removeItem(at: folder) }
        for path in [folder.appendingPathComponent("notify").path, "@countersign-test-\(UUID().uuidString)"] {
            let socket = try NotifySocket(path: path)
            let notifier = try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": path]))
            #expect(notifier.send("READY=1\nSTATUS=testing"))
            #expect(try await socket.receive(timeout: .seconds(30)) == "READY=1\nSTATUS=testing")
        }
    }

    /// A manager that does not read (its queue full) costs dropped messages
    /// after a bounded wait, never a daemon blocked in `send`: shutdown's
    /// STOPPING=1 once hung there.
    @Test(.timeLimit(.minutes(5))) func aFullQueueDropsMessagesInsteadOfBlocking() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("countersign-notify-\(UUID().uuidString)").path
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        #expect(descriptor >= 0)
        defer {
            close(descriptor)
            unlink(path)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        let notifier = try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": path]))
        // Nobody reads: the first messages queue, then one is refused after its wait.
        var sent: [Bool] = []
        while sent.count < 5_000 && sent.last != false { sent.append(notifier.send("WATCHDOG=1")) }
        #expect(sent.first == true)
        #expect(sent.last == false, "\(sent.count) sent, none refused")
    }

    @Test func withoutSystemdThereIsNothingToNotify() {
        #expect(SystemdNotifier(environment: [:]) == nil)
        #expect(SystemdNotifier(environment: ["NOTIFY_SOCKET": "relative/path"]) == nil)
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "30000000"]) == .seconds(30))
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"]) == nil)
        #expect(SystemdNotifier.watchdogInterval(environment: [:]) == nil)
    }
}
