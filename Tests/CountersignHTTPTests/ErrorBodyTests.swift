import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOHTTP1
import ServiceRunner
import TestSupport
import Testing

@testable import CountersignHTTP
@testable import DaemonTestSupport

/// http-api.md: every error has the contract's body; a 500 says `internal` and
/// nothing of the fault, which only the log names.
@Suite struct ErrorBodyTests {
    struct DiskFault: Error, CustomStringConvertible {
        var description: String { "disk I/O error in /var/lib/countersign/countersign.sqlite" }
    }

    @Test func anUnexpectedFaultIs500InternalAndOnlyTheLogNamesIt() async throws {
        let router = Router(context: AppRequestContext.self)
        router.add(middleware: RequestIntakeMiddleware(trusted: []))
        router.get("fault") { _, _ -> Response in throw DiskFault() }
        let logs = LogCapture()
        let readiness = RunningServices.Readiness()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { readiness.ready(port: $0.localAddress?.port ?? 0) }, logger: logs.logger())
        try await RunningServices.run([app], readiness: readiness, logger: logs.logger()) { port in
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/fault"), timeout: .seconds(120))
            let body = String(buffer: try await response.body.collect(upTo: 1 << 16))
            #expect(response.status.code == 500)
            #expect(response.headers.first(name: "Content-Type")?.hasPrefix("application/json") == true)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            #expect(json["success"] as? Bool == false)
            #expect(json["error"] as? String == "internal")
            #expect((json["message"] as? String)?.isEmpty == false)
            #expect(!body.contains("disk") && !body.contains("countersign.sqlite") && !body.contains("DiskFault"))
            #expect(logs.text.contains("DiskFault") && logs.text.contains("disk I/O error"))
        }
    }
}
