import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

extension Request {
    /// Reads the body as JSON of type `T`: 415 unless it is JSON, 413 over the
    /// size limit, 400 naming the missing or malformed field.
    func decodeJSON<T: Decodable>(as type: T.Type, context: AppRequestContext) async throws -> T {
        let buffer = try await readBody(context: context)
        guard buffer.readableBytes > 0 else {
            throw APIError.invalidRequest("The request body must be a JSON object.")
        }
        guard let contentType = headers[.contentType], Self.isJSON(contentType) else {
            throw APIError.unsupportedMediaType
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
        } catch let error as DecodingError {
            throw APIError.invalidRequest(Self.describe(error))
        }
    }

    /// Reads (and bounds) a body the route does not use, so the size limit holds everywhere.
    func readBody(context: AppRequestContext) async throws -> ByteBuffer {
        do {
            return try await body.collect(upTo: context.maxUploadSize)
        } catch is NIOTooManyBytesError {
            // A body with no declared length (chunked), cut as it arrives.
            throw APIError.payloadTooLarge
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIError.payloadTooLarge
        }
    }

    static func isJSON(_ contentType: String) -> Bool {
        // The usual spelling needs no trimming (Foundation's, per character, is not cheap).
        if contentType == "application/json" { return true }
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return mediaType.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }

    static func describe(_ error: DecodingError) -> String {
        func field(_ path: [any CodingKey]) -> String {
            path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "The field `\(field(context.codingPath + [key]))` is missing."
        case .valueNotFound(_, let context):
            return "The field `\(field(context.codingPath))` must not be null."
        case .typeMismatch(_, let context):
            return "The field `\(field(context.codingPath))` has the wrong type."
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty
                ? "The request body is not valid JSON."
                : "The field `\(field(context.codingPath))` is malformed."
        @unknown default:
            return "The request body is malformed."
        }
    }
}
