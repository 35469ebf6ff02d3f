import HTTPTypes
import Hummingbird

/// Sets ``AppRequestContext/clientIP`` from `X-Forwarded-For` when the peer is a trusted proxy.
struct ClientAddressMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let trusted: [IPNetwork]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if !trusted.isEmpty {
            context.clientIP = ClientAddress.resolve(
                peer: context.clientIP,
                forwardedFor: request.headers[values: .xForwardedFor],
                trusted: trusted
            )
        }
        return try await next(request, context)
    }
}
