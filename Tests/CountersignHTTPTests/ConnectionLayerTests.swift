import CountersignCore
import CountersignRuntime
import Foundation
import NIOCore
import NIOEmbedded
import TestSupport
import Testing

@testable import CountersignHTTP
@testable import DaemonTestSupport

/// The public listener's own HTTP/1 layer (``GuardedHTTP1Channel``): what
/// Hummingbird's connection loop did for a client must still hold.
@Suite struct ConnectionLayerTests {
    /// Every answer says when (`Date`, IMF-fixdate) and who (`Server`).
    @Test func answersCarryADateAndTheServersName() async throws {
        try await withTestDaemon(.socket) { daemon in
            let connection = try RawConnection(port: try ConnectionLimitTests.port(daemon))
            connection.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            let answer = try #require(await connection.waitForClose(limit: .seconds(90))).text
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
            let fields = Self.fields(answer)
            #expect(fields["server"] == "countersign")
            let date = try #require(fields["date"])
            let format = DateFormatter()
            format.locale = Locale(identifier: "en_US_POSIX")
            format.timeZone = TimeZone(identifier: "GMT")
            format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let parsed = try #require(format.date(from: date), "not an IMF-fixdate: \(date)")
            #expect(format.string(from: parsed) == date)
        }
    }

    /// A request that is not HTTP is answered 400, and its connection closed.
    @Test func aMalformedRequestIsAnswered400AndItsConnectionClosed() async throws {
        try await withTestDaemon(.socket) { daemon in
            let connection = try RawConnection(port: try ConnectionLimitTests.port(daemon))
            connection.send("GET /healthz HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n")
            let answer = try #require(await connection.waitForClose(limit: .seconds(90)), "still open").text
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer)")
        }
    }

    /// A client that closes its side after its request still gets the answer,
    /// then the connection closes; one that closes it with nothing asked is closed at once.
    @Test func aClientThatClosesItsSideIsAnsweredThenClosed() async throws {
        try await withTestDaemon(.socket) { daemon in
            let port = try ConnectionLimitTests.port(daemon)
            let asking = try RawConnection(port: port)
            asking.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            asking.closeWriting()
            let answer = try #require(await asking.waitForClose(limit: .seconds(90)), "still open").text
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")

            let silent = try RawConnection(port: port)
            silent.closeWriting()
            #expect(try #require(await silent.waitForClose(limit: .seconds(90)), "still open").text == "")
        }
    }

    /// A client that asks to be told before it sends its body (`Expect:
    /// 100-continue`) is told; one that declares a body over the limit is
    /// refused from its head, without waiting for the body.
    @Test func aBodyIsAskedForOrRefusedFromItsHead() async throws {
        try await withTestDaemon(.socket) { daemon in
            let port = try ConnectionLimitTests.port(daemon)
            let body = #"{"email":"nobody@example.com","password":"wrong-password"}"#
            let asking = try RawConnection(port: port)
            asking.send(
                "POST /api/mobile/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(body.utf8.count)\r\nExpect: 100-continue\r\n\r\n")
            let goOn = await asking.read(until: { $0.contains("\r\n\r\n") }, limit: .seconds(25))
            #expect(goOn.hasPrefix("HTTP/1.1 100"), "\(goOn)")
            asking.send(body)
            // The route read the body: it names the field the body lacks.
            let answer = await asking.read(until: { $0.contains("}") }, limit: .seconds(25))
            #expect(answer.contains("HTTP/1.1 400") && answer.contains("deviceName"), "\(answer)")

            let large = try RawConnection(port: port)
            large.send(
                "POST /api/mobile/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(APILimits.maxBodyBytes + 1)\r\n\r\n")
            let refused = await large.read(until: { $0.contains("}") }, limit: .seconds(25))
            #expect(refused.hasPrefix("HTTP/1.1 413"), "\(refused)")
            #expect(refused.contains("payload_too_large"))
        }
    }

    /// A request that asks the server to close is the last one run: one
    /// pipelined behind it is not answered (HTTP's parser takes bytes after
    /// `Connection: close` for an error, which may add a bare 400 before the close).
    @Test func nothingIsAnsweredAfterConnectionClose() async throws {
        try await withTestDaemon(.socket) { daemon in
            let connection = try RawConnection(port: try ConnectionLimitTests.port(daemon))
            connection.send(
                "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                    + "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let text = try #require(await connection.waitForClose(limit: .seconds(90)), "still open").text
            #expect(text.components(separatedBy: "HTTP/1.1 200").count == 2, "one answer: \(text)")
        }
    }

    /// A caller cancelled while it waits for the connections to close returns:
    /// shutdown's bound on that wait holds.
    @Test(.timeLimit(.minutes(5))) func aCancelledWaitForTheConnectionsReturns() async throws {
        let connections = OpenConnections()
        let open = NIOAsyncTestingChannel()
        try await open.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 9))
        connections.track(open)
        let waiting = Task { await connections.allClosed() }
        while connections.waiting == 0 { try await Task.sleep(for: .milliseconds(5)) }
        waiting.cancel()
        await waiting.value
        #expect(connections.count == 1)
        #expect(connections.waiting == 0)
        try await open.close()
    }

    /// Shutdown waits for the listener's connections: ``OpenConnections/allClosed()``
    /// returns only once the last one has closed.
    @Test(.timeLimit(.minutes(5))) func shutdownWaitsForTheLastConnection() async throws {
        let connections = OpenConnections()
        await connections.allClosed()  // none open: at once
        let (first, second) = (NIOAsyncTestingChannel(), NIOAsyncTestingChannel())
        for channel in [first, second] { try await channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 9)) }
        connections.track(first)
        connections.track(second)
        #expect(connections.count == 2)
        try await first.close()
        #expect(connections.count == 1)
        let drained = Task { await connections.allClosed() }
        // It waits (the time limit catches a caller that never registers).
        while connections.waiting == 0 { try await Task.sleep(for: .milliseconds(5)) }
        try await second.close()
        await drained.value
        #expect(connections.count == 0)
        #expect(connections.waiting == 0)
    }

    /// The header fields of an HTTP/1.1 answer, by lowercased name.
    static func fields(_ answer: String) -> [String: String] {
        let head = answer.components(separatedBy: "\r\n\r\n").first ?? ""
        var fields: [String: String] = [:]
        for line in head.components(separatedBy: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return fields
    }
}
