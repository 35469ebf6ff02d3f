import CountersignRuntime
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import TestSupport
import Testing

@testable import DaemonTestSupport

/// Routes whose answers need no socket, driven through the router itself
/// (HummingbirdTesting's `.router`): the daemon is built as `serve` builds
/// it, its services run, but no port is bound.
@Suite struct RouterLevelTests {
    static func withRouter(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        try await withTemporaryFolder { folder in
            let server = try await buildApplication(configuration: TestDaemon.configuration(folder), logger: Logger(label: "router-test"))
            try await server.application.test(.router) { client in try await body(client) }
        }
    }

    static func json(_ buffer: ByteBuffer) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any]) ?? [:]
    }

    /// A typed code that is not one is refused naming the field, on both routes, before any request is looked up.
    @Test func aTypedCodeThatIsNotOneIsRefusedNamingTheField() async throws {
        try await Self.withRouter { client in
            for bad in [#"{"code":"12a456"}"#, #"{"code":"12345"}"#, #"{"code":123456}"#, #"{}"#] {
                try await client.execute(
                    uri: "/api/mobile/auth/reset/phone/verify-code/AAAAAAAAAAAAAAAAAAAAAA", method: .post,
                    headers: [.contentType: "application/json"], body: ByteBuffer(string: bad)
                ) { response in
                    #expect(response.status == .badRequest, "\(bad)")
                    let body = Self.json(response.body)
                    #expect(body["error"] as? String == "invalid_request", "\(bad)")
                    #expect((body["message"] as? String)?.contains("`code`") == true, "\(bad): \(body)")
                }
            }
            // A well-formed code for no such request: 404, nothing counted against anyone.
            try await client.execute(
                uri: "/api/mobile/auth/reset/phone/verify-code/AAAAAAAAAAAAAAAAAAAAAA", method: .post,
                headers: [.contentType: "application/json"], body: ByteBuffer(string: #"{"code":"123456"}"#)
            ) { response in
                #expect(response.status == .notFound)
            }
        }
    }

    /// The relying services' route asks for the integration's key before anything else.
    @Test func theRelyingServicesRouteNeedsItsKey() async throws {
        try await Self.withRouter { client in
            try await client.execute(
                uri: "/v1/approvals/AAAAAAAAAAAAAAAAAAAAAA/verify-code", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"code":"123456"}"#)
            ) { response in
                #expect(response.status == .unauthorized)
                #expect(Self.json(response.body)["error"] as? String == "unauthorized")
            }
        }
    }
}
