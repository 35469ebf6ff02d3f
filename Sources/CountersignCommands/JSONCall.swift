import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// One JSON call to a daemon: the status and the decoded object (empty when
/// the body is not a JSON object).
func jsonCall(
    base: String, _ method: String, _ path: String, _ body: [String: any Sendable]? = nil, apiKey: String? = nil
) async throws -> (status: Int, body: [String: any Sendable]) {
    var request = HTTPClientRequest(url: base + path)
    request.method = .RAW(value: method)
    if let apiKey { request.headers.add(name: "X-API-Key", value: apiKey) }
    if let body {
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
    }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(40))
    let bytes = try await response.body.collect(upTo: 1 << 20)
    let object = (try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView)) as? [String: any Sendable]) ?? [:]
    return (Int(response.status.code), object)
}
