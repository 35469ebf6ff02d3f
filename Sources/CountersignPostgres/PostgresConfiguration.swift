import Foundation
import NIOSSL
import PostgresNIO

/// Where a cluster's PostgreSQL database is: parsed from a `postgres://` or
/// `postgresql://` URL (user, password, host, port, database, `sslmode`,
/// `sslrootcert`, `connect_timeout`).
public struct PostgresConfiguration: Sendable, Equatable {
    public enum SSLMode: String, Sendable, CaseIterable {
        case disable, prefer, require
        case verifyFull = "verify-full"
    }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var sslMode: SSLMode
    /// PEM file of the certificate authorities that `verify-full` trusts
    /// (`sslrootcert`, as libpq); without it, the system's.
    public var rootCertificateFile: String?
    /// How long opening a connection may take, TLS and sign-in included
    /// (`connect_timeout`, in seconds as libpq, though 0 does not mean forever).
    public var connectTimeout: Duration = Self.defaultConnectTimeout
    public static let defaultConnectTimeout: Duration = .seconds(5)
    /// How long a query waits for a pooled connection (`--database-connection-wait`).
    public var connectionWait: Duration = Self.defaultConnectionWait
    public static let defaultConnectionWait: Duration = .seconds(5)
    /// How long a query or transaction may run on its connection (`--database-query-limit`).
    public var queryLimit: Duration = Self.defaultQueryLimit
    public static let defaultQueryLimit: Duration = .seconds(30)

    /// Whether `value` names a PostgreSQL database rather than an SQLite file.
    public static func isURL(_ value: String) -> Bool {
        value.hasPrefix("postgres://") || value.hasPrefix("postgresql://")
    }

    /// - Parameter password: used when the URL carries none (a file or a systemd credential).
    public init(url value: String, password: String? = nil) throws(PostgresURLError) {
        guard Self.isURL(value), let components = URLComponents(string: value) else {
            throw PostgresURLError("expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=…&sslrootcert=…&connect_timeout=…]")
        }
        guard let host = components.host, !host.isEmpty else { throw PostgresURLError("the URL names no host") }
        guard let user = components.user, !user.isEmpty else { throw PostgresURLError("the URL names no user") }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else { throw PostgresURLError("the URL names no database (…/DATABASE)") }
        var sslMode = SSLMode.prefer
        var rootCertificateFile: String?
        var connectTimeout = Self.defaultConnectTimeout
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let mode = item.value.flatMap(SSLMode.init(rawValue:)) else {
                    throw PostgresURLError("sslmode must be one of \(SSLMode.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                sslMode = mode
            case "sslrootcert":
                guard let path = item.value, path.hasPrefix("/") else {
                    throw PostgresURLError("sslrootcert must be an absolute path to a PEM file")
                }
                rootCertificateFile = path
            case "connect_timeout":
                guard let seconds = item.value.flatMap({ Int($0) }), (1...600).contains(seconds) else {
                    throw PostgresURLError("connect_timeout must be 1 to 600 seconds")
                }
                connectTimeout = .seconds(seconds)
            default:
                throw PostgresURLError("unknown URL parameter \(item.name) (only sslmode, sslrootcert and connect_timeout are understood)")
            }
        }
        if rootCertificateFile != nil, sslMode != .verifyFull {
            throw PostgresURLError("sslrootcert is used only with sslmode=verify-full")
        }
        self.host = host
        self.port = components.port ?? 5432
        self.username = user.removingPercentEncoding ?? user
        self.password = components.password.map { $0.removingPercentEncoding ?? $0 } ?? password
        self.database = database.removingPercentEncoding ?? database
        self.sslMode = sslMode
        self.rootCertificateFile = rootCertificateFile
        self.connectTimeout = connectTimeout
    }

    /// The URL without its password, for logs and messages.
    public var redacted: String {
        "postgres://\(username)@\(host.contains(":") ? "[\(host)]" : host):\(port)/\(database)?sslmode=\(sslMode.rawValue)"
            + (rootCertificateFile.map { "&sslrootcert=\($0)" } ?? "")
            + (connectTimeout == Self.defaultConnectTimeout ? "" : "&connect_timeout=\(connectTimeout.components.seconds)")
    }

    var tlsConfiguration: TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        // As libpq: only verify-full checks the certificate and the host name.
        if sslMode != .verifyFull { tls.certificateVerification = .none }
        if let rootCertificateFile { tls.trustRoots = .file(rootCertificateFile) }
        return tls
    }

    func clientConfiguration(maximumConnections: Int) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS =
            switch sslMode {
            case .disable: .disable
            case .prefer: .prefer(tlsConfiguration)
            case .require, .verifyFull: .require(tlsConfiguration)
            }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
        configuration.options.maximumConnections = maximumConnections
        configuration.options.minimumConnections = 1
        configuration.options.connectTimeout = connectTimeout
        // A node frozen inside a transaction (stopped, cut off) would keep its
        // locks, and every node's writes behind them, until its connection is
        // found dead: the server ends a transaction left idle this long.
        configuration.options.additionalStartupParameters = [
            ("application_name", "countersign"), ("idle_in_transaction_session_timeout", "60s"),
        ]
        return configuration
    }

    /// The notification connection's `application_name`.
    public static let notificationsApplicationName = "countersign-notifications"

    /// One connection outside the pool: the notification connection, or the
    /// probe before the pool starts (``PostgresProbe``), named apart in `pg_stat_activity`.
    func connectionConfiguration(applicationName: String = notificationsApplicationName) throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS =
            switch sslMode {
            case .disable: .disable
            case .prefer: .prefer(try NIOSSLContext(configuration: tlsConfiguration))
            case .require, .verifyFull: .require(try NIOSSLContext(configuration: tlsConfiguration))
            }
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
        configuration.options.connectTimeout = TimeAmount(connectTimeout)
        // Named apart from the pool's sessions in pg_stat_activity.
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        return configuration
    }
}

public struct PostgresURLError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
