import CountersignCore
import HTTPTypes
import Hummingbird
import Logging

/// Settles the client address (from `X-Forwarded-For` when the peer is a
/// trusted proxy) before any rate limit or audit reads it, refuses a declared
/// body over the limit before anything reads it, and turns every failure into
/// the contract's error body, whatever threw it: no route, a too-large body, a
/// broker refusal or an unexpected fault (logged, never shown).
///
/// One middleware, its work out of line, as ``AccessLogMiddleware``.
struct RequestIntakeMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let trusted: [IPNetwork]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, try admitted(request, context))
        } catch {
            return try Self.response(to: error, request: request, context: context)
        }
    }

    /// The context with the client's address settled; throws 413 for a declared body over the limit.
    @inline(never)
    func admitted(_ request: Request, _ context: Context) throws -> Context {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > context.maxUploadSize {
            throw APIError.payloadTooLarge
        }
        guard !trusted.isEmpty else { return context }
        var context = context
        context.clientIP = ClientAddress.resolve(peer: context.clientIP, forwardedFor: request.headers[values: .xForwardedFor], trusted: trusted)
        return context
    }

    @inline(never)
    static func response(to error: any Error, request: Request, context: Context) throws -> Response {
        switch error {
        case let error as APIError:
            return try error.response(from: request, context: context)
        case let error as BrokerError:
            return try APIError.from(error).response(from: request, context: context)
        case is HashingQueueFull:
            context.logger.warning("password hashing queue full: answered 503")
            return try APIError.unavailable.response(from: request, context: context)
        case is StoreUnavailable:
            context.logger.warning("the database did not answer in time: answered 503")
            return try APIError.unavailable.response(from: request, context: context)
        case let error as any HTTPResponseError:
            // The framework's own refusals (no route, a body too large, …), by their status alone.
            if error.status.code >= 500 {
                context.logger.error("request failed", metadata: ["error": "\(String(reflecting: type(of: error)))", "detail": "\(error)"])
            }
            return try map(error.status).response(from: request, context: context)
        default:
            context.logger.error("request failed", metadata: ["error": "\(String(reflecting: type(of: error)))", "detail": "\(error)"])
            return try APIError.internalError.response(from: request, context: context)
        }
    }

    static func map(_ status: HTTPResponse.Status) -> APIError {
        switch status {
        case .notFound: .routeNotFound
        case .methodNotAllowed: .methodNotAllowed
        case .contentTooLarge: .payloadTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .badRequest: .invalidRequest("The request is malformed.")
        default:
            status.code >= 500
                ? .internalError
                : APIError(status, "invalid_request", "The request could not be handled.")
        }
    }
}
