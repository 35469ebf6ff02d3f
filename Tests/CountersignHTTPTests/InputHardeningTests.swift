import AsyncHTTPClient
import CountersignCore
import CountersignRuntime
import CountersignServices
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

@testable import CountersignHTTP
@testable import DaemonTestSupport

/// Small holes an attacker would try: control characters in passwords, bodies
/// without a media type, proxies that add ports, IPv6 clients rotating addresses.
@Suite struct InputHardeningTests {
    @Test func aNewPasswordWithAControlCharacterIsWeak() async throws {
        #expect(PasswordPolicy.violation(of: "\u{0}abcdefgh") != nil)
        #expect(PasswordPolicy.violation(of: "abcd\u{7}efgh") != nil)
        #expect(PasswordPolicy.violation(of: "ordinary words 1") == nil)
        try await withTestDaemon { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            for password in ["\u{0}abcdefg", "abcdefgh\u{0}", "tab\there ok?", "line\nbreak!"] {
                let answer = try await daemon.call(
                    .POST, "/api/mobile/auth/reset/phone/initiate", json: ["email": Fixture.email, "newPassword": password])
                #expect(answer.status == 400)
                #expect(answer["error"] == "weak_password")
            }
        }
    }

    @Test func aJSONBodyWithoutAContentTypeIs415() async throws {
        try await withTestDaemon { daemon in
            let body = Array(#"{"email":"ana@example.com","newPassword":"staple orbit lantern"}"#.utf8)
            let answer = try await daemon.call(.POST, "/api/mobile/auth/reset/phone/initiate", rawBody: body, contentType: nil)
            #expect(answer.status == 415)
            #expect(answer["error"] == "unsupported_media_type")
        }
    }

    @Test func aBodyOfExactly16KiBIsReadWithItsUnknownFieldsIgnoredAndOneByteMoreIs413() async throws {
        try await withTestDaemon(.socket) { daemon in
            try await daemon.createUser(Fixture.email, password: Fixture.password)
            /// A login body of exactly `size` bytes, padded by a field the API does not know.
            func login(size: Int) throws -> [UInt8] {
                var fields = ["email": Fixture.email, "password": Fixture.password, "deviceName": "d", "platform": "iOS", "padding": ""]
                let bare = try JSONSerialization.data(withJSONObject: fields).count
                fields["padding"] = String(repeating: "p", count: size - bare)
                let body = try JSONSerialization.data(withJSONObject: fields)
                #expect(body.count == size)
                return Array(body)
            }
            let limit = 16 * 1024
            let atLimit = try await daemon.call(.POST, "/api/mobile/auth/login", rawBody: try login(size: limit))
            #expect(atLimit.status == 200)
            #expect(atLimit["apiKey"] != nil)
            let over = try await daemon.call(.POST, "/api/mobile/auth/login", rawBody: try login(size: limit + 1))
            #expect(over.status == 413)
            #expect(over["error"] == "payload_too_large")

            // Sent in chunks with no declared length, the same body is cut at the limit as it arrives.
            for (size, status) in [(limit, 200), (limit + 1, 413)] {
                let bytes = try login(size: size)
                var request = HTTPClientRequest(url: daemon.base + "/api/mobile/auth/login")
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                let chunks = stride(from: 0, to: bytes.count, by: 1000).map { ByteBuffer(bytes: bytes[$0..<min($0 + 1000, bytes.count)]) }
                let (stream, continuation) = AsyncStream.makeStream(of: ByteBuffer.self)
                for chunk in chunks { continuation.yield(chunk) }
                continuation.finish()
                request.body = .stream(stream, length: .unknown)
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(20))
                let answer = try await response.body.collect(upTo: 1 << 16)
                #expect(Int(response.status.code) == status, "\(size) bytes chunked: \(String(buffer: answer))")
            }
        }
    }

    @Test func forwardedHopsWithAPortAreAddresses() {
        let proxies = [IPNetwork("127.0.0.1")!]
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: ["198.51.100.1:5555"], trusted: proxies) == "198.51.100.1")
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: ["[2001:db8::1]:443"], trusted: proxies) == "2001:db8::1")
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: ["[2001:db8::7]"], trusted: proxies) == "2001:db8::7")
        // Not an address with a port: still garbage.
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: ["evil:80"], trusted: proxies) == "127.0.0.1")
    }

    /// trust.md: the connection cap counts an IPv6 peer by its /64, and a trusted proxy is not capped.
    @Test func connectionsAreCappedPerIPv6Slash64() throws {
        let connections = ConnectionsPerAddress(cap: 1, trusted: [IPNetwork("2001:db8:ffff::/48")!], metrics: AppMetrics())
        let first = connections.admit(try SocketAddress(ipAddress: "2001:db8:1:2::1", port: 40000))
        #expect(first.admitted && first.key == "2001:db8:1:2::/64")
        // Another host of the same /64 is over the cap; one of the next /64 is not.
        #expect(connections.admit(try SocketAddress(ipAddress: "2001:db8:1:2:ffff::9", port: 40001)).admitted == false)
        #expect(connections.admit(try SocketAddress(ipAddress: "2001:db8:1:3::1", port: 40002)).admitted)
        // Inside the trusted proxy's network: not counted.
        for port in 40003..<40006 { #expect(connections.admit(try SocketAddress(ipAddress: "2001:db8:ffff::1", port: port)) == (true, nil)) }
        // The first connection closes: its /64 has room again.
        connections.release(try #require(first.key))
        #expect(connections.admit(try SocketAddress(ipAddress: "2001:db8:1:2::7", port: 40006)).admitted)
    }

    @Test func ipv6ClientsCountByTheir64() async throws {
        #expect(ClientAddress.limitKey("2001:db8:1:2:aaaa:bbbb:cccc:1") == "2001:db8:1:2::/64")
        #expect(ClientAddress.limitKey("2001:db8:1:2::9") == "2001:db8:1:2::/64")
        #expect(ClientAddress.limitKey("2001:db8:1:3::9") == "2001:db8:1:3::/64")
        #expect(ClientAddress.limitKey("203.0.113.7") == "203.0.113.7")
        try await withTestDaemon(
            .socket,
            configure: {
                $0.trustedProxies = [IPNetwork("127.0.0.1")!]
                $0.rateLimits[.statusPollsPerIP] = RateLimit(count: 2, window: 60)
            }, clock: ManualClock()
        ) { daemon in
            var statuses: [Int] = []
            for address in ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::3", "2001:db8:1:3::1"] {
                let answer = try await daemon.call(
                    .GET, "/api/mobile/auth/reset/phone/status/AAAAAAAAAAAAAAAAAAAAAA", headers: [("X-Forwarded-For", address)])
                statuses.append(answer.status)
            }
            // The third address is in the same /64 as the first two: the same client. The fourth is not.
            #expect(statuses == [404, 404, 429, 404])
        }
    }
}

@Suite struct BcryptPaddingTests {
    @Test func aCheckOfAnOlderCostIsPaddedToTheConfiguredWork() {
        #expect(BcryptPasswordHasher.cost(of: "$2b$10$abcdefghijklmnopqrstuv") == 10)
        #expect(BcryptPasswordHasher.cost(of: "not a hash") == nil)
        // 2^10 + 2^10 + 2^11 = 2^12.
        #expect(BcryptPasswordHasher.paddingCosts(forHashCost: 10, configured: 12) == [10, 11])
        #expect(BcryptPasswordHasher.paddingCosts(forHashCost: 12, configured: 12).isEmpty)
        #expect(BcryptPasswordHasher.paddingCosts(forHashCost: 13, configured: 12).isEmpty)
        #expect(BcryptPasswordHasher.paddingCosts(forHashCost: nil, configured: 12).isEmpty)
    }

    @Test func aPaddedCheckStillAnswersCorrectly() async throws {
        let old = BcryptPasswordHasher(cost: 4)
        let hash = try await old.hash("correct horse")
        let current = BcryptPasswordHasher(cost: 6)
        #expect(try await current.verify("correct horse", hash: hash))
        #expect(try await current.verify("wrong horse", hash: hash) == false)
    }
}
