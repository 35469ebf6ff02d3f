import CountersignCore
import HTTPTypes
import Hummingbird
import Logging

/// Turns every failure into the contract's error body, whatever threw it:
/// no route, a too-large body, a broker refusal or an unexpected fault (logged,
/// never shown).
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            return try Self.response(to: error, request: request, context: context)
        }
    }

    /// Out of line and synchronous: every request waiting below this
    /// middleware (a long poll) holds its async frame, which would otherwise
    /// have room for all of this.
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
        case let error as HTTPError:
            return try map(error).response(from: request, context: context)
        default:
            context.logger.error("request failed", metadata: ["error": "\(String(reflecting: type(of: error)))", "detail": "\(error)"])
            return try APIError.internalError.response(from: request, context: context)
        }
    }

    static func map(_ error: HTTPError) -> APIError {
        switch error.status {
        case .notFound: .routeNotFound
        case .methodNotAllowed: .methodNotAllowed
        case .contentTooLarge: .payloadTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .badRequest: .invalidRequest("The request is malformed.")
        default:
            error.status.code >= 500
                ? .internalError
                : APIError(error.status, "invalid_request", "The request could not be handled.")
        }
    }
}
