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
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch let error as BrokerError {
            return try APIError.from(error).response(from: request, context: context)
        } catch let error as HTTPError {
            return try Self.map(error).response(from: request, context: context)
        } catch {
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

/// Refuses a declared body over the limit before anything reads it.
struct BodyLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > context.maxUploadSize {
            throw APIError.payloadTooLarge
        }
        return try await next(request, context)
    }
}

/// One log line per request, naming the route template, never the raw path:
/// paths carry request ids, which are credentials.
struct AccessLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = (ContinuousClock.now - start).components
        context.logger.debug(
            "request",
            metadata: [
                "method": "\(request.method.rawValue)",
                "route": "\(context.endpointPath ?? "unmatched")",
                "status": "\(response.status.code)",
                "ms": "\(elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000)",
            ]
        )
        return response
    }
}

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

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}
