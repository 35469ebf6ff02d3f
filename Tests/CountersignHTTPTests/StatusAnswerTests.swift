import CountersignCore
import Foundation
import Hummingbird
import TestSupport
import Testing

@testable import CountersignHTTP
@testable import DaemonTestSupport

/// The status answer is written without the JSON encoder; its bytes must be the encoder's.
@Suite struct StatusAnswerTests {
    static func request(_ state: ApprovalState, id: String = SecureToken.requestID()) -> ApprovalRequest {
        let now = Date(timeIntervalSince1970: 1_795_000_000.123)
        return ApprovalRequest(
            id: id, userID: nil, subject: "unknown:x", action: .passwordReset, state: state, createdAt: now,
            expiresAt: now.addingTimeInterval(60), completionWindow: 300, updatedAt: now, numberCode: nil, newPasswordHash: nil,
            requester: RequesterInfo(ip: "127.0.0.1", userAgent: nil))
    }

    @Test(arguments: ApprovalState.allCases) func theWrittenAnswerIsTheEncodersBytes(state: ApprovalState) throws {
        let answer = PhoneResetController.StatusResponse(Self.request(state))
        let written = try #require(answer.plainJSON)
        #expect(Data(written.utf8) == (try APIJSON.encoder.encode(answer)))
    }

    @Test func aValueThatNeedsEscapingGoesThroughTheEncoder() throws {
        let answer = PhoneResetController.StatusResponse(Self.request(.pending, id: #"a"b\c"#))
        #expect(answer.plainJSON == nil)
        #expect(JSONText.needsNoEscaping("AZaz09-_:.+ /"))
        for text in ["\"", "\\", "\n", "\u{7F}", "é"] { #expect(!JSONText.needsNoEscaping(text), "\(text)") }
    }

    /// Polls of a request that stays as it is share one encoding; any change
    /// of what the answer says (state, how it was answered, expiry, request) encodes anew.
    @Test func anUnchangedRequestSharesItsEncodingAndAChangedOneIsEncodedAgain() throws {
        let last = LastStatusResponse()
        var encoded: [String] = []
        func answer(_ request: ApprovalRequest) throws -> String {
            let response = last.response(for: request) {
                encoded.append(request.id)
                return Response(status: .ok, headers: [.contentType: "\(encoded.count)"])
            }
            return try #require(response.headers[.contentType])
        }
        let pending = Self.request(.pending)
        #expect(try answer(pending) == "1")
        #expect(try answer(pending) == "1")
        var approved = pending
        approved.state = .approved
        approved.via = .push
        #expect(try answer(approved) == "2")
        var offline = approved
        offline.via = .offlineCode
        #expect(try answer(offline) == "3")
        var later = offline
        later.expiresAt = later.expiresAt.addingTimeInterval(1)
        #expect(try answer(later) == "4")
        #expect(try answer(later) == "4")
        let other = Self.request(.pending)
        #expect(try answer(other) == "5")
        // One entry: the first request's answer was replaced.
        #expect(try answer(pending) == "6")
        #expect(encoded == [pending.id, pending.id, pending.id, pending.id, other.id, pending.id])
    }
}
