import Hummingbird
import HummingbirdHTTP2
import Logging
import NIOSSL
import ServiceRunner

extension FakeFCM {
    /// Serves the fake on 127.0.0.1 (an ephemeral port) while `body` runs, then
    /// shuts it down. With `tls`, it speaks HTTP/2 (or HTTP/1.1) over TLS.
    public func serve<T: Sendable>(
        tls: TLSConfiguration? = nil,
        _ body: @Sendable (_ base: String) async throws -> T
    ) async throws -> T {
        var logger = Logger(label: "fake-fcm")
        logger.logLevel = .warning
        let readiness = RunningServices.Readiness()
        let app = Application(
            router: router(),
            server: try tls.map { try .http2Upgrade(tlsConfiguration: $0) } ?? .http1(),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { readiness.ready(port: $0.localAddress?.port ?? 0) },
            logger: logger
        )
        return try await RunningServices.run([app], readiness: readiness, logger: logger) { port in
            try await body("http\(tls == nil ? "" : "s")://127.0.0.1:\(port)")
        }
    }
}
