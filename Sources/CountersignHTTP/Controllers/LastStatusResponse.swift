import CountersignCore
import Foundation
import Hummingbird
import Synchronization

/// The last status answer encoded, with what it was encoded from: while a
/// request stays as it is, the polls of it share one encoding. One approval
/// wakes every long poll of its request at once (18,000 in the benchmark), and
/// a requester's plain polls all find the same pending request; each encoded
/// the same bytes anew.
///
/// One entry: a poll of another request replaces it. The answer is a function
/// of the ``Key``'s fields alone, so an equal key gives the same bytes.
final class LastStatusResponse: Sendable {
    /// What a status answer says: the request, its state, until when, and how it was answered.
    struct Key: Equatable, Sendable {
        let id: String
        let state: ApprovalState
        let expiresAt: Date
        let via: AnswerVia?

        init(_ request: ApprovalRequest) {
            (id, state, expiresAt, via) = (request.id, request.state, request.expiresAt, request.via)
        }
    }

    private let last = Mutex<(key: Key, response: Response)?>(nil)

    /// The answer for `request`: the last one if it was encoded from an equal key, else `encode`'s, kept.
    func response(for request: ApprovalRequest, encode: () throws -> Response) rethrows -> Response {
        let key = Key(request)
        if let kept = last.withLock({ $0?.key == key ? $0?.response : nil }) { return kept }
        let response = try encode()
        last.withLock { $0 = (key, response) }
        return response
    }
}
