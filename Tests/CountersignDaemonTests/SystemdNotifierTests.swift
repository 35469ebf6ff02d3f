import CountersignRuntime
import Foundation
import Testing

@Suite struct SystemdNotifierTests {
    @Test func messagesReachPathAndAbstractSockets() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("countersign-notify-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for path in [folder.appendingPathComponent("notify").path, "@countersign-test-\(UUID().uuidString)"] {
            let socket = try NotifySocket(path: path)
            let notifier = try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": path]))
            #expect(notifier.send("READY=1\nSTATUS=testing"))
            #expect(socket.receive(timeout: .seconds(2)) == "READY=1\nSTATUS=testing")
        }
    }

    @Test func withoutSystemdThereIsNothingToNotify() {
        #expect(SystemdNotifier(environment: [:]) == nil)
        #expect(SystemdNotifier(environment: ["NOTIFY_SOCKET": "relative/path"]) == nil)
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "30000000"]) == .seconds(30))
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"]) == nil)
        #expect(SystemdNotifier.watchdogInterval(environment: [:]) == nil)
    }
}
