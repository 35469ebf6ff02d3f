import CountersignHTTP
import CountersignRuntime
import CountersignStore
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@testable import DaemonTestSupport

@Suite struct OpenAPIDocumentTests {
    @Test func everyRouteIsDocumented() async throws {
        try await withTemporaryFolder { folder in
            let document = URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("docs/openapi.yaml")
            let text = try String(contentsOf: document, encoding: .utf8)
            let documented = Self.operations(in: text)
            let server = try await buildApplication(configuration: TestDaemon.configuration(folder), logger: LogCapture().logger())
            #expect(server.routes.count >= 12)
            for route in server.routes {
                #expect(documented.contains(route), "\(route) is missing from docs/openapi.yaml")
            }
        }
    }

    /// `METHOD /path` for every operation under `paths:` (two-space path keys, four-space methods).
    static func operations(in yaml: String) -> Set<String> {
        var operations = Set<String>()
        var path: String?
        var inPaths = false
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("paths:") {
                inPaths = true
                continue
            }
            if inPaths, let first = line.first, first != " " { inPaths = false }
            guard inPaths else { continue }
            if line.hasPrefix("  /") {
                path = String(line.dropFirst(2).dropLast(line.hasSuffix(":") ? 1 : 0))
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), let path {
                let key = line.trimmingCharacters(in: .whitespaces).dropLast()
                if ["get", "post", "put", "delete", "patch"].contains(String(key)) {
                    operations.insert("\(key.uppercased()) \(path)")
                }
            }
        }
        return operations
    }
}
