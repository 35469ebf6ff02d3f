import CountersignDevice
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The default transport against a hostile server on 127.0.0.1: a redirect is the
/// answer (never followed with the API key), and an answer too long is refused.
@Suite struct TransportTests {
    /// A server (Python's http.server) that answers `/redirect` with a 307 to `/elsewhere`
    /// on itself, `/large` with 2 MiB, and `/log` with every path and X-API-Key sent before.
    static let server = """
        import http.server, json, os, sys, threading
        # Gone with the test: its standard input closes when the test process ends.
        threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
        seen = []
        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args): pass
            def handle_one(self):
                if self.path == "/log":
                    body = json.dumps(seen).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                seen.append("%s %s" % (self.path, self.headers.get("X-API-Key")))
                if self.path == "/redirect":
                    self.send_response(307)
                    self.send_header("Location", "http://127.0.0.1:%d/elsewhere" % self.server.server_port)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif self.path == "/large":
                    body = b"x" * (2 << 20)
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                else:
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
            do_GET = do_POST = handle_one
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        sys.stdout.write("port %d\\n" % server.server_port)
        sys.stdout.flush()
        server.serve_forever()
        """

    @Test func aRedirectIsNotFollowedAndALongAnswerIsRefused() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.server]
        let output = Pipe()
        process.standardOutput = output
        let input = Pipe()
        process.standardInput = input
        try process.run()
        defer { process.terminate() }
        let reader = output.fileHandleForReading
        let first = try #require(String(data: reader.availableData, encoding: .utf8))
        let port = try #require(first.split(separator: " ").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
        let base = "http://127.0.0.1:\(port)"
        let transport = CountersignDevice.urlSession(timeout: 10)

        let (status, _) = try await transport("POST", base + "/redirect", Data("{}".utf8), "secret-api-key")
        #expect(status == 307)
        await #expect(throws: DeviceError.self) { _ = try await transport("GET", base + "/large", nil, nil) }
        // The server saw the redirect (with the key) and the long answer's request, and never /elsewhere.
        let (_, log) = try await transport("GET", base + "/log", nil, nil)
        let seen = try #require(try JSONSerialization.jsonObject(with: log) as? [String])
        #expect(seen == ["/redirect secret-api-key", "/large None"])
    }
}
