import AsyncHTTPClient
import CountersignOutbound
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import Testing

/// trust.md, "Outbound connections go where they were checked": a host is
/// resolved once per client, every address checked, and the connection made
/// to a checked address; a resolver that answers otherwise the next time
/// (DNS rebinding) changes nothing. The resolver here is the seam production
/// resolves through; two servers listen on one port, one on an address the
/// check allows (127.0.0.2), one on an address it refuses (127.0.0.1).
@Suite struct CheckedConnectionTests {
    /// Answers every request 201 and records the `Host` header it came with.
    final class Recorder: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let hosts = Mutex<[String]>([])

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): hosts.withLock { $0.append(head.headers.first(name: "host") ?? "") }
            case .body: break
            case .end:
                let head = HTTPResponseHead(version: .http1_1, status: .created, headers: ["content-length": "0"])
                context.write(wrapOutboundOut(.head(head)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    static func listen(_ host: String, port: Int, _ recorder: Recorder) async throws -> any Channel {
        try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(recorder)
                }
            }
            .bind(host: host, port: port).get()
    }

    /// Answers `127.0.0.2` the first time and `127.0.0.1` every time after (a rebinding name).
    final class Rebinding: HostResolver {
        let asked = Mutex(0)
        func addresses(of host: String) async throws -> [[UInt8]] {
            let count = asked.withLock { count in
                count += 1
                return count
            }
            return count == 1 ? [[127, 0, 0, 2]] : [[127, 0, 0, 1]]
        }
    }

    @Test func aNameThatRebindsIsConnectedWhereItWasCheckedAndItsNewAnswerRefused() async throws {
        let allowed = Recorder()
        let trap = Recorder()
        let first = try await Self.listen("127.0.0.2", port: 0, allowed)
        let port = try #require(first.localAddress?.port)
        let second = try await Self.listen("127.0.0.1", port: port, trap)
        defer {
            first.close(promise: nil)
            second.close(promise: nil)
        }
        let resolver = Rebinding()
        let clients = CheckedHTTPClients(
            resolver: resolver, reuse: .seconds(3600), allows: { _, address in address == [127, 0, 0, 2] },
            makeClient: { dnsOverride in
                var configuration = HTTPClient.Configuration()
                configuration.dnsOverride = dnsOverride
                return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            })
        let url = try #require(URL(string: "http://push.test:\(port)/endpoint"))
        // Several sends on one client: resolved once, all to the checked address, `Host` the name.
        for _ in 0..<3 {
            var request = HTTPClientRequest(url: url.absoluteString)
            request.method = .POST
            let response = try await clients.client(for: url).execute(request, timeout: .seconds(10))
            #expect(response.status == .created)
        }
        #expect(resolver.asked.withLock { $0 } == 1)
        #expect(allowed.hosts.withLock { $0 } == Array(repeating: "push.test:\(port)", count: 3))
        #expect(trap.hosts.withLock { $0 }.isEmpty)
        await clients.shutdown()

        // A client made later resolves again: the new answer is checked, and refused before any connection.
        let later = CheckedHTTPClients(
            resolver: resolver, reuse: .zero, allows: { _, address in address == [127, 0, 0, 2] },
            makeClient: { dnsOverride in
                var configuration = HTTPClient.Configuration()
                configuration.dnsOverride = dnsOverride
                return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            })
        await #expect(throws: CheckedHTTPClients.Refusal.forbidden([127, 0, 0, 1])) { try await later.client(for: url) }
        #expect(trap.hosts.withLock { $0 }.isEmpty)
        await later.shutdown()
    }

    /// Every address a name resolves to is checked, not only the first.
    @Test func oneForbiddenAddressAmongAllowedOnesRefusesTheHost() async throws {
        struct Mixed: HostResolver {
            func addresses(of host: String) async throws -> [[UInt8]] { [[127, 0, 0, 2], [10, 0, 0, 1]] }
        }
        let clients = CheckedHTTPClients(
            resolver: Mixed(), allows: { _, address in address == [127, 0, 0, 2] },
            makeClient: { _ in HTTPClient(eventLoopGroupProvider: .singleton) })
        await #expect(throws: CheckedHTTPClients.Refusal.forbidden([10, 0, 0, 1])) {
            try await clients.client(for: URL(string: "https://mixed.test/x")!)
        }
        await clients.shutdown()
    }
}
