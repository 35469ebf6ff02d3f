import AsyncHTTPClient
import CountersignCore
import CountersignOutbound
import Foundation
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle

/// The ready push senders and the client services they need.
public struct PushStack: Sendable {
    /// Every configured provider behind one port.
    public let sender: PushRouter
    public let clientServices: [HTTPClientService]
}

public enum PushSetup {
    /// Builds a sender for each configured provider (FCM, APNs, Web Push);
    /// `nil` when none is. A bad key file or setting throws one line naming what is wrong.
    public static func make(configuration: PushConfiguration, deadTokens: any PushTokenStore, logger: Logger) async throws -> PushStack? {
        var senders: [PushProvider: any PushSender] = [:]
        var services: [HTTPClientService] = []
        do {
            if let fcm = try await makeFCM(configuration: configuration, deadTokens: deadTokens, logger: logger) {
                senders[.fcm] = fcm.sender
                services.append(fcm.service)
            }
            if let apns = configuration.apns {
                let pem = try keyText(apns.keyFile, what: "APNs key")
                let tokens: APNsProviderToken
                do {
                    tokens = try await APNsProviderToken(pem: pem, keyID: apns.keyID, teamID: apns.teamID)
                } catch {
                    throw ServiceAccountError("\(apns.keyFile): \(error)")
                }
                let client = try makeClient(caFile: apns.caFile)
                services.append(HTTPClientService(client: client))
                var sender = apns.url.map(APNsSender.Configuration.init(url:)) ?? APNsSender.Configuration()
                sender.sealedPush = configuration.sealedPush
                senders[.apns] = APNsSender(tokens: tokens, client: client, configuration: sender, deadTokens: deadTokens)
            }
            if let webPush = configuration.webPush {
                let key = try VAPIDKeyFile.load(path: webPush.vapidKeyFile, create: webPush.createKey, logger: logger)
                let vapid = try await VAPIDSigner(key: key, subject: webPush.subject)
                // Endpoints are the devices' choice: each host is resolved once, checked, and connected to where it was checked.
                let policy = configuration.endpoints
                let base = try clientConfiguration(caFile: nil)
                let clients = CheckedHTTPClients(
                    allows: { _, address in policy.allows(address: address) },
                    makeClient: { dnsOverride in
                        var pinned = base
                        pinned.dnsOverride = dnsOverride
                        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: pinned)
                    })
                services.append(HTTPClientService(checked: clients))
                senders[.webPush] = WebPushSender(
                    vapid: vapid, clients: clients, configuration: .init(endpoints: configuration.endpoints), deadTokens: deadTokens)
            }
        } catch {
            for service in services { try? await service.shutdown() }
            throw error
        }
        guard !senders.isEmpty else { return nil }
        return PushStack(sender: PushRouter(senders), clientServices: services)
    }

    /// FCM's sender and its client; `nil` when no service account is configured (or its file is empty).
    static func makeFCM(
        configuration push: PushConfiguration, deadTokens: any PushTokenStore, logger: Logger
    ) async throws -> (sender: FCMSender, service: HTTPClientService)? {
        guard let path = push.serviceAccountFile else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ServiceAccountError("cannot read FCM service account file \(path)")
        }
        if ServiceAccount.isEmptyFile(data) {
            logger.notice("FCM push disabled: the service account file is empty", metadata: ["file": "\(path)"])
            return nil
        }
        let account = try ServiceAccount.parse(data, source: path)
        let client = try makeClient(caFile: push.caFile)
        do {
            let tokens = try await AccessTokenProvider(account: account, client: client, logger: logger)
            var configuration = FCMSender.Configuration(endpoint: push.endpoint)
            configuration.sealedPush = push.sealedPush
            configuration.openConnection = { [caFile = push.caFile] in try makeClient(caFile: caFile) }
            // FCM itself (https): sends as frames on swift-nio-http2; the token exchange stays on the client.
            if push.endpoint.lowercased().hasPrefix("https://") {
                configuration.streams = try HTTP2PushClient(endpoint: push.endpoint, caFile: push.caFile)
            }
            let sender = FCMSender(account: account, tokens: tokens, client: client, configuration: configuration, deadTokens: deadTokens)
            return (sender, HTTPClientService(client: client, sender: sender))
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// A key file's text; one line naming it when it cannot be read.
    public static func keyText(_ path: String, what: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else { throw ServiceAccountError("cannot read the \(what) file \(path)") }
        return String(decoding: data, as: UTF8.self)
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
    /// stream when every connection is full. `readTimeout`: how long an answer
    /// may go without a byte before its request fails.
    public static func makeClient(
        caFile: String?, connectTimeout: TimeAmount = .seconds(10), readTimeout: TimeAmount = .seconds(15)
    ) throws -> HTTPClient {
        HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: try clientConfiguration(caFile: caFile, connectTimeout: connectTimeout, readTimeout: readTimeout))
    }

    /// The configuration of ``makeClient(caFile:connectTimeout:readTimeout:)``.
    static func clientConfiguration(
        caFile: String?, connectTimeout: TimeAmount = .seconds(10), readTimeout: TimeAmount = .seconds(15)
    ) throws -> HTTPClient.Configuration {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            guard FileManager.default.isReadableFile(atPath: caFile) else {
                throw ServiceAccountError("cannot read the CA file \(caFile)")
            }
            tls.additionalTrustRoots = [.file(caFile)]
        }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.httpVersion = .automatic
        configuration.timeout = .init(connect: connectTimeout, read: readTimeout)
        // A server may answer a stream completely and then reset it with
        // RST_STREAM(NO_ERROR) (RFC 9113 §8.1). swift-nio-http2 counts every
        // reset it receives, and after 200 on one connection within 30 s it
        // sends GOAWAY(ENHANCE_YOUR_CALM) and stops reading that connection
        // promptly, so the sends behind it wait out their deadline. Moving to
        // a new connection after `streamsPerConnection` streams keeps each one
        // under that count; the pool opens the next connection while the last
        // streams of the old one finish.
        configuration.maximumUsesPerConnection = streamsPerConnection
        // Never follow a redirect: a Web Push endpoint is a device's choice, and a
        // redirect would take the POST past the endpoint's address checks.
        configuration.redirectConfiguration = .disallow
        // No distributed tracing here: without a tracer the client skips a span,
        // and a second parse of the URL, on every send.
        configuration.tracing.tracer = nil
        return configuration
    }
}
