import AsyncHTTPClient
import CountersignCore
import Foundation
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle

/// A ready FCM sender and the client service it needs.
public struct PushStack: Sendable {
    public let sender: FCMSender
    public let clientService: HTTPClientService
}

public enum PushSetup {
    /// Loads the service account and builds the sender; `nil` when push is off
    /// (no file, or an empty one). A bad file throws one line naming what is wrong.
    public static func make(settings: PushSettings, deadTokens: any PushTokenStore, logger: Logger) async throws -> PushStack? {
        guard let path = settings.serviceAccountFile else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ServiceAccountError("cannot read FCM service account file \(path)")
        }
        if data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            logger.notice("push disabled: the FCM service account file is empty", metadata: ["file": "\(path)"])
            return nil
        }
        let account = try ServiceAccount.parse(data, source: path)
        let client = try makeClient(caFile: settings.caFile)
        do {
            let tokens = try await AccessTokenProvider(account: account, client: client, logger: logger)
            var configuration = FCMSender.Configuration(endpoint: settings.endpoint)
            configuration.openConnection = { [caFile = settings.caFile] in try makeClient(caFile: caFile) }
            let sender = FCMSender(account: account, tokens: tokens, client: client, configuration: configuration, deadTokens: deadTokens)
            return PushStack(sender: sender, clientService: HTTPClientService(client: client, sender: sender))
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// Streams sent on one HTTP/2 connection before the client moves to a new one:
    /// under swift-nio-http2's 200 resets received per connection (it counts each
    /// reset in a sliding 30 s window, and over 200 ends the connection). A
    /// connection change costs a TLS handshake, so the fewer the better (pushes to
    /// the benchmark's stub: median 10.4k/s moving every 150, 11.6k every 190,
    /// 12.1k never moving; runs on this VM spread ±15%).
    public static let streamsPerConnection = 190

    /// One shared client: HTTP/2 when the server offers it, the system's trust
    /// roots plus `caFile` when given.
    /// `connectTimeout` also bounds how long a send waits in the pool for a
    /// stream when every connection is full.
    public static func makeClient(caFile: String?, connectTimeout: TimeAmount = .seconds(10)) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            guard FileManager.default.isReadableFile(atPath: caFile) else {
                throw ServiceAccountError("cannot read FCM CA file \(caFile)")
            }
            tls.additionalTrustRoots = [.file(caFile)]
        }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.httpVersion = .automatic
        configuration.timeout = .init(connect: connectTimeout, read: .seconds(15))
        // A server may answer a stream completely and then reset it with
        // RST_STREAM(NO_ERROR) (RFC 9113 §8.1). swift-nio-http2 counts every
        // reset it receives, and after 200 on one connection within 30 s it
        // sends GOAWAY(ENHANCE_YOUR_CALM) and stops reading that connection
        // promptly, so the sends behind it wait out their deadline. Moving to
        // a new connection after `streamsPerConnection` streams keeps each one
        // under that count; the pool opens the next connection while the last
        // streams of the old one finish.
        configuration.maximumUsesPerConnection = streamsPerConnection
        // No distributed tracing here: without a tracer the client skips a span,
        // and a second parse of the URL, on every send.
        configuration.tracing.tracer = nil
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }
}
