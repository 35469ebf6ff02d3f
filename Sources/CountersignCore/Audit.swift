import DequeModule
import Foundation
import Synchronization

/// What happened, for the audit trail. Raw values are what `countersign audit` shows and filters on.
public enum AuditKind: String, Sendable, CaseIterable, Codable {
    case loginSucceeded = "login_ok"
    case loginFailed = "login_failed"
    case keyRefreshed = "key_refreshed"
    case keyRefreshFailed = "key_refresh_failed"
    case pushTokenUpdated = "push_token_updated"
    case deviceSignedOut = "device_signed_out"
    case requestCreated = "request_created"
    case promptSuppressed = "prompt_suppressed"
    case pushed
    case approved
    case denied
    case numberMismatch = "number_mismatch"
    case completed
    case cancelled
    case expired
    case fraudReported = "fraud_reported"
    case rateLimited = "rate_limited"
    case userUnlocked = "user_unlocked"
}

/// Who did it and from where, as far as the daemon knows.
public struct AuditContext: Sendable, Equatable {
    public var ip: String?
    public var userAgent: String?
    public var deviceID: String?

    public init(ip: String? = nil, userAgent: String? = nil, deviceID: String? = nil) {
        self.ip = ip
        self.userAgent = userAgent
        self.deviceID = deviceID
    }

    public static let system = AuditContext()
}

/// One security event. Never holds a secret: requests are named by their
/// ``ApprovalRequest/logReference``, push tokens by their last characters.
public struct AuditEvent: Sendable, Equatable {
    public var at: Date
    public var kind: AuditKind
    public var userID: String?
    public var email: String?
    public var deviceID: String?
    public var requestRef: String?
    public var ip: String?
    public var userAgent: String?
    public var detail: String?

    public init(
        at: Date = Date(),
        kind: AuditKind,
        userID: String? = nil,
        email: String? = nil,
        deviceID: String? = nil,
        requestRef: String? = nil,
        context: AuditContext = .system,
        detail: String? = nil
    ) {
        self.at = at
        self.kind = kind
        self.userID = userID
        self.email = email
        self.deviceID = deviceID ?? context.deviceID
        self.requestRef = requestRef
        self.ip = context.ip
        self.userAgent = context.userAgent
        self.detail = detail
    }
}

/// Where audit events go: `record` never waits; a writer takes everything
/// gathered since its last write in one batch (one transaction). Bounded: past
/// `capacity` unwritten events the oldest are dropped and counted.
public final class AuditLog: Sendable {
    private let buffer = Mutex<(events: Deque<AuditEvent>, dropped: Int)>(([], 0))
    private let signal: AsyncStream<Void>.Continuation
    /// Yields whenever events are waiting.
    public let wakeups: AsyncStream<Void>
    public let capacity: Int

    public init(capacity: Int = 100_000) {
        self.capacity = capacity
        (wakeups, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    public func record(_ event: AuditEvent) {
        buffer.withLock { buffer in
            if buffer.events.count >= capacity {
                buffer.events.removeFirst()
                buffer.dropped += 1
            }
            buffer.events.append(event)
        }
        signal.yield()
    }

    /// Everything recorded since the last call, and how many events were dropped meanwhile.
    public func take() -> (events: [AuditEvent], dropped: Int) {
        buffer.withLock { buffer in
            defer { buffer = ([], 0) }
            return (Array(buffer.events), buffer.dropped)
        }
    }
}

/// Durable home of the audit trail.
public protocol AuditStore: Sendable {
    func append(_ events: [AuditEvent]) async throws
    /// Events, oldest first, filtered.
    func auditEvents(since: Date?, email: String?, kind: AuditKind?, limit: Int) async throws -> [AuditEvent]
    /// Removes events older than `date`; returns how many.
    func pruneAudit(before date: Date) async throws -> Int
}
