import Foundation
import HTTPTypes
import OpenAPIRuntime

/// Puts a key on every request: the generator leaves security schemes to the caller.
/// An integration's API key goes as `Authorization: Bearer csk_…`, a device's as `X-API-Key`.
public struct KeyMiddleware: ClientMiddleware {
    public enum Key: Sendable {
        case integration(String)
        case device(String)
    }

    let key: Key

    public init(_ key: Key) {
        self.key = key
    }

    public func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        switch key {
        case .integration(let key): request.headerFields[.authorization] = "Bearer \(key)"
        case .device(let key): request.headerFields[HTTPField.Name("X-API-Key")!] = key
        }
        return try await next(request, body, baseURL)
    }
}
