import CountersignCore
import Foundation
import Logging
import Synchronization
import Testing

@testable import CountersignServices

/// http-api.md: every security event is appended to the audit log. A
/// database that does not answer for a while delays events; it loses none.
@Suite struct AuditWriterTests {
    /// Refuses the first `outage` writes as a database out of reach would.
    final class UnreachableAtFirst: AuditStore {
        let outage: Mutex<Int>
        let written = Mutex<[String]>([])
        init(outage: Int) { self.outage = Mutex(outage) }

        func append(_ events: [AuditEvent]) async throws {
            let refused = outage.withLock { left in
                defer { left = max(0, left - 1) }
                return left > 0
            }
            if refused { throw StoreUnavailable() }
            written.withLock { $0 += events.map { $0.detail ?? "" } }
        }
        func auditEvents(since: Date?, email: String?, kind: AuditKind?, limit: Int) async throws -> [AuditEvent] { [] }
        func auditEvents(requestRef: String) async throws -> [AuditEvent] { [] }
        func pruneAudit(before date: Date) async throws -> Int { 0 }
    }

    @Test func eventsWaitThroughAnOutageAndAreWrittenInOrder() async throws {
        let log = AuditLog()
        let store = UnreachableAtFirst(outage: 3)
        let writer = AuditWriter(
            log: log, store: store, logger: Logger(label: "audit-test"), firstPause: .milliseconds(10), longestPause: .milliseconds(40))
        let running = Task { try await writer.run() }
        defer { running.cancel() }
        for index in 1...3 { log.record(AuditEvent(kind: .loginSucceeded, detail: "\(index)")) }
        try await Task.sleep(for: .milliseconds(20))
        for index in 4...5 { log.record(AuditEvent(kind: .loginSucceeded, detail: "\(index)")) }
        for _ in 0..<200 where store.written.withLock({ $0.count }) < 5 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(store.written.withLock { $0 } == ["1", "2", "3", "4", "5"])
        #expect(store.outage.withLock { $0 } == 0)
    }

    @Test func eventsPutBackPastTheCapacityDropTheOldestAndCountThem() {
        let log = AuditLog(capacity: 3)
        log.record(AuditEvent(kind: .loginSucceeded, detail: "new"))
        log.putBack((1...3).map { AuditEvent(kind: .loginSucceeded, detail: "\($0)") })
        let (events, dropped) = log.take()
        #expect(events.map(\.detail) == ["2", "3", "new"])
        #expect(dropped == 1)
    }
}
