// swift-tools-version:6.2
import PackageDescription

let package = Package(
    name: "countersign",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .executable(name: "countersign", targets: ["countersign"])
    ],
    dependencies: [
        // The phone's side, a package of its own (what apps ship), and the formats both sides speak.
        .package(path: "countersign-device"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: []),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
    ],
    targets: [
        // The approval state machine, the broker actor, value types and ports; no I/O.
        .target(
            name: "CountersignCore",
            dependencies: [
                .product(name: "CountersignWire", package: "countersign-device"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),
        // The SQL both stores run, written once: statements, bound values and row decoding; no driver.
        .target(
            name: "CountersignSQL",
            dependencies: [
                .product(name: "CountersignWire", package: "countersign-device"), "CountersignCore",
            ]
        ),
        // SQLite (GRDB) implementation of the store ports, and migrations.
        .target(
            name: "CountersignStore",
            dependencies: [
                .product(name: "CountersignWire", package: "countersign-device"),
                "CountersignCore",
                "CountersignSQL",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // PostgreSQL (PostgresNIO) implementation of the store ports, for a cluster of nodes:
        // migrations under an advisory lock, LISTEN/NOTIFY wake-ups, shared rate counters.
        .target(
            name: "CountersignPostgres",
            dependencies: [
                .product(name: "CountersignWire", package: "countersign-device"),
                "CountersignCore",
                "CountersignSQL",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Outbound HTTP to URLs others chose (Web Push endpoints, webhooks): each host
        // resolved once, its addresses checked, the connection made to a checked one.
        .target(
            name: "CountersignOutbound",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // FCM HTTP v1: service account, OAuth token, message builder, sender.
        .target(
            name: "CountersignPush",
            dependencies: [
                .product(name: "CountersignWire", package: "countersign-device"),
                "CountersignCore",
                "CountersignOutbound",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Webhooks of the approvals API: signed posts from the outbox.
        .target(
            name: "CountersignWebhooks",
            dependencies: [
                "CountersignCore",
                "CountersignOutbound",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // libcurl, for its SMTP client (Debian: libcurl4-openssl-dev).
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // Mail: SMTP submission through libcurl, the mail templates, the mail outbox's deliverer.
        .target(
            name: "CountersignMail",
            dependencies: [
                "CountersignCore",
                "CCurl",
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Device keys: ES256 answers and proofs of possession, checked (and, for the reference device, made) with jwt-kit.
        .target(
            name: "CountersignDeviceKeys",
            dependencies: [
                "CountersignCore",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The background services that keep the broker's world moving (expiry,
        // audit writer, upkeep, push dispatch, outbox, rate-limit reports) and the metrics.
        .target(
            name: "CountersignServices",
            dependencies: [
                "CountersignCore",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // Hummingbird: routes, answer types, middleware and the guarded HTTP/1.1 channel (no wiring: see CountersignRuntime).
        .target(
            name: "CountersignHTTP",
            dependencies: [
                .product(name: "CountersignWire", package: "countersign-device"),
                "CountersignCore",
                "CountersignDeviceKeys",
                "CountersignServices",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        // The daemon as it runs: configuration, wiring (buildApplication), bcrypt, systemd.
        .target(
            name: "CountersignRuntime",
            dependencies: [
                "CountersignCore",
                "CountersignStore",
                "CountersignPostgres",
                "CountersignPush",
                "CountersignHTTP",
                "CountersignServices",
                "CountersignMail",
                "CountersignWebhooks",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
        // Runs a service group until its server is ready, for the demo, the tests and the fake FCM.
        .target(
            name: "ServiceRunner",
            dependencies: [
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The commands (`serve` and the admin commands), a library the tests call in-process.
        .target(
            name: "CountersignCommands",
            dependencies: [
                .product(name: "CountersignDevice", package: "countersign-device"),
                .product(name: "CountersignWire", package: "countersign-device"),
                "CountersignCore",
                "CountersignPush",
                "CountersignStore",
                "CountersignPostgres",
                "CountersignRuntime",
                "CountersignMail",
                "CountersignDeviceKeys",
                "CountersignWebhooks",
                "ServiceRunner",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The executable: the entry point alone.
        .executableTarget(name: "countersign", dependencies: ["CountersignCommands"]),
        // A strict fake of FCM and Google's token endpoint, for tests and the benchmark: test support, not shipped.
        .target(
            name: "FakeFCM",
            dependencies: [
                "ServiceRunner",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            path: "Tests/FakeFCM"
        ),
        // The benchmark suite's reference route (benchmarks/suite.py) and the push benchmark, beside the scripts
        // that run them; the Debian package and `swift build --product countersign` build the daemon alone.
        .executableTarget(
            name: "countersign-bare-route",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "benchmarks/countersign-bare-route"
        ),
        .executableTarget(
            name: "countersign-push-bench",
            dependencies: [
                "CountersignCore",
                "CountersignPush",
                "FakeFCM",
                .product(name: "CountersignWire", package: "countersign-device"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "benchmarks/countersign-push-bench"
        ),
        // Processes the tests start that die with the test process (TiedProcess).
        // What every test target shares: temporary folders, log capture, running programs.
        .target(name: "TestSupport", dependencies: [.product(name: "Logging", package: "swift-log")], path: "Tests/TestSupport"),
        // A real SMTP server for the mail tests (aiosmtpd through scripts/smtp-test-server.py).
        .target(name: "MailTestSupport", dependencies: ["TestSupport"], path: "Tests/MailTestSupport"),
        // A daemon built as `serve` builds it, on 127.0.0.1, with the fakes and helpers its tests use.
        .target(
            name: "DaemonTestSupport",
            dependencies: [
                "TestSupport",
                "MailTestSupport",
                "CountersignCore",
                "CountersignStore",
                "CountersignHTTP",
                "CountersignRuntime",
                "CountersignMail",
                "CountersignWebhooks",
                "ServiceRunner",
                "FakeFCM",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/DaemonTestSupport"),
        // A throw-away PostgreSQL server for the tests (scripts/pg-test-server.sh).
        .target(
            name: "PostgresTestSupport",
            dependencies: [
                "TestSupport", "CountersignCore", "CountersignStore", "CountersignPostgres", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/PostgresTestSupport"),
        .testTarget(
            name: "CountersignSQLTests",
            dependencies: ["CountersignSQL", "CountersignCore"]
        ),
        .testTarget(
            name: "CountersignCoreTests",
            dependencies: [
                .product(name: "CountersignWire", package: "countersign-device"),
                "TestSupport",
                "PostgresTestSupport",
                "CountersignCore",
                "CountersignStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "CountersignPostgresTests",
            dependencies: [
                "CountersignCore",
                "CountersignPostgres",
                "PostgresTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(
            name: "CountersignStoreTests",
            dependencies: [
                "TestSupport",
                "CountersignCore",
                "CountersignStore",
                "CountersignPostgres",
                "PostgresTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(
            name: "CountersignPushTests",
            dependencies: [
                .product(name: "CountersignWire", package: "countersign-device"),
                "CountersignOutbound",
                "TestSupport",
                "CountersignCore",
                "CountersignPush",
                "FakeFCM",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                // A server that answers and then resets each stream (EarlyAnswerServer).
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .testTarget(
            name: "CountersignDeviceKeysTests",
            dependencies: [
                "CountersignCore",
                "CountersignDeviceKeys",
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
        .testTarget(
            name: "CountersignRuntimeTests",
            dependencies: [
                "TestSupport",
                "DaemonTestSupport",
                "CountersignStore",
                "CountersignCore",
                "CountersignHTTP",
                "CountersignPush",
                "CountersignPostgres",
                "CountersignRuntime",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "CountersignWebhooksTests",
            dependencies: [
                "TestSupport",
                "DaemonTestSupport",
                "CountersignCore",
                "CountersignRuntime",
                "CountersignWebhooks",
                "CountersignOutbound",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "CountersignMailTests",
            dependencies: [
                "TestSupport",
                "DaemonTestSupport",
                .product(name: "NIOHTTP1", package: "swift-nio"),
                "MailTestSupport",
                "CountersignCore",
                "CountersignMail",
                "CountersignRuntime",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "CountersignServicesTests",
            dependencies: [
                "CountersignCore",
                "CountersignServices",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "CountersignHTTPTests",
            dependencies: [
                .product(name: "CountersignDevice", package: "countersign-device"),
                .product(name: "CountersignWire", package: "countersign-device"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                "TestSupport",
                "DaemonTestSupport",
                "CountersignCore",
                "CountersignStore",
                "CountersignPush",
                "CountersignHTTP",
                "CountersignRuntime",
                "CountersignServices",
                "ServiceRunner",
                "FakeFCM",
                "CountersignMail",
                "CountersignDeviceKeys",
                "CountersignWebhooks",
                "MailTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "CountersignDaemonTests",
            dependencies: [
                .product(name: "CountersignDevice", package: "countersign-device"),
                // The binary, for what needs a process of its own; the commands, run in-process.
                "countersign",
                "CountersignCommands",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                "CountersignCore",
                "TestSupport",
                "CountersignRuntime",
                "FakeFCM",
                "MailTestSupport",
                "PostgresTestSupport",
                "CountersignWebhooks",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
    ]
)

for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    target.swiftSettings = settings
}
