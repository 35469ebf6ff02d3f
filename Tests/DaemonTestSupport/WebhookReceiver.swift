import CountersignWebhooks
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import ServiceRunner
import Synchronization
import TestSupport

/// A webhook receiver on 127.0.0.1 that checks each event's signature as a
/// relying service must, records what arrived, and can answer 500 a number of
/// times first, or first hold a number of requests unanswered for a while
/// (recorded with status 0: the sender has given up on them by then), or
/// answer 410 Gone while `gone` is set.
final class WebhookReceiver: Sendable {
    struct Arrival: Sendable {
        let id: String
        let type: String
        let approvalID: String
        let json: [String: any Sendable]
        let signatureValid: Bool
        let status: Int
    }

    private let secretHeld: Mutex<String>
    private let goneHeld = Mutex(false)
    private let arrivals = Mutex<[Arrival]>([])
    private let failures = Mutex<Int>(0)
    private let stalls = Mutex<Int>(0)
    private let stall: Duration

    init(secret: String, failFirst: Int = 0, stallFirst: Int = 0, stall: Duration = .seconds(12)) {
        self.secretHeld = Mutex(secret)
        self.stall = stall
        failures.withLock { $0 = failFirst }
        stalls.withLock { $0 = stallFirst }
    }

    /// The secret signatures are checked with: a relying service's, changed when it rotates.
    var secret: String {
        get { secretHeld.withLock { $0 } }
        set { secretHeld.withLock { $0 = newValue } }
    }
    /// While set, every validly signed event is answered 410 Gone.
    var gone: Bool {
        get { goneHeld.withLock { $0 } }
        set { goneHeld.withLock { $0 = newValue } }
    }

    var all: [Arrival] { arrivals.withLock { $0 } }
    /// The events answered 200 with a valid signature.
    var accepted: [Arrival] { all.filter { $0.status == 200 && $0.signatureValid } }

    /// The types of `approvalID`'s accepted events in the order they first came, each
    /// event once: what a receiver that drops a `webhook-id` it has seen acts on. (A
    /// delivery whose answer the daemon did not get in time is sent again, same id.)
    func events(of approvalID: String) -> [String] {
        var seen = Set<String>()
        return accepted.filter { $0.approvalID == approvalID && seen.insert($0.id).inserted }.map(\.type)
    }

    /// Serves on `port` (0: any free one) while `body` runs; `body` gets the webhook URL.
    func serve<T: Sendable>(port: Int = 0, _ body: @Sendable (_ url: String, _ port: Int) async throws -> T) async throws -> T {
        let router = Router()
        router.post("hook") { request, context -> Response in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            let data = Data(bytes.readableBytesView)
            func header(_ name: String) -> String { request.headers[HTTPField.Name(name)!] ?? "" }
            let valid = WebhookSignature.verify(
                id: header(WebhookSignature.idHeader), timestamp: header(WebhookSignature.timestampHeader),
                signature: header(WebhookSignature.signatureHeader), secret: self.secret, body: data, now: Date())
            let json = (try? JSONSerialization.jsonObject(with: data) as? [String: any Sendable]) ?? [:]
            let payload = json["data"] as? [String: any Sendable] ?? [:]
            let held = self.stalls.withLock { left in
                guard left > 0 else { return false }
                left -= 1
                return true
            }
            let fail =
                !held
                && self.failures.withLock { left in
                    guard left > 0 else { return false }
                    left -= 1
                    return true
                }
            let status = held ? 0 : !valid ? 400 : self.gone ? 410 : fail ? 500 : 200
            self.arrivals.withLock {
                $0.append(
                    Arrival(
                        id: json["id"] as? String ?? "", type: json["type"] as? String ?? "", approvalID: payload["approvalId"] as? String ?? "",
                        json: json, signatureValid: valid, status: status))
            }
            if held {
                try? await Task.sleep(for: self.stall)
                return Response(status: .ok)
            }
            return Response(status: .init(code: status))
        }
        let readiness = RunningServices.Readiness()
        var logger = Logger(label: "webhook-receiver")
        logger.logLevel = .critical
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
            onServerRunning: { channel in readiness.ready(port: channel.localAddress?.port ?? 0) }, logger: logger)
        return try await RunningServices.run([app], readiness: readiness, logger: logger) { port in
            try await body("http://127.0.0.1:\(port)/hook", port)
        }
    }

    /// Waits until `condition` holds, at most `timeout`.
    func wait(timeout: Duration = .seconds(60), until condition: (WebhookReceiver) -> Bool) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while !condition(self) {
            guard clock.now < deadline else { throw TestFailure("webhook receiver: condition not met in \(timeout); got \(all.map(\.type))") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
