import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO

/// One connection tried before the pool starts. A refusal that waiting cannot
/// cure (the server's certificate, TLS itself, the password, the database's
/// name) is reported at once in its own words, where the pool would keep
/// trying until its circuit breaker gave up a minute later with no reason. A
/// server that is not up yet is left to the pool, which waits for it.
enum PostgresProbe {
    /// Throws the reason the database can never be opened with `settings`; returns otherwise.
    static func check(_ configuration: PostgresConfiguration, logger: Logger) async throws(PostgresStoreError) {
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.any(),
                configuration: try configuration.connectionConfiguration(applicationName: "countersign-probe"), id: 0, logger: logger
            ).get()
        } catch {
            if let reason = lasting(error) { throw .cannotOpen(configuration.redacted, reason) }
            return
        }
        try? await connection.close()
    }

    /// What the refusal says, when it is one that trying again cannot change.
    static func lasting(_ error: any Error) -> String? {
        if lastingTLS(error) { return "TLS: \(error)" }
        guard let error = error as? PSQLError else { return nil }
        switch error.code {
        case .sslUnsupported:
            return "the server does not accept TLS (sslmode=\(PostgresConfiguration.SSLMode.require.rawValue) or verify-full asks for it)"
        case .server:
            // Class 28: invalid authorization; 3D000: no such database.
            guard let state = error.serverInfo?[.sqlState], state.hasPrefix("28") || state == "3D000" else { return nil }
            return error.serverInfo?[.message].map { "\($0) (SQLSTATE \(state))" } ?? "SQLSTATE \(state)"
        default:
            guard let underlying = error.underlying, lastingTLS(underlying) else { return nil }
            return "TLS: \(underlying)"
        }
    }

    /// A handshake refused (the certificate, the protocol) or a trust file that
    /// cannot be read; not a connection cut mid-handshake (a server restarting,
    /// a proxy in front), which the pool waits out.
    static func lastingTLS(_ error: any Error) -> Bool {
        switch error as? NIOSSLError {
        case .handshakeFailed, .noSuchFilesystemObject, .failedToLoadCertificate, .unableToValidateCertificate, .cannotMatchULabel:
            return true
        default:
            return false
        }
    }
}
