import CountersignCore
import Foundation
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
        let answer = PhoneResetController.StatusAnswer(Self.request(state))
        let written = try #require(answer.plainJSON)
        #expect(Data(written.utf8) == (try APIJSON.encoder.encode(answer)))
    }

    @Test func aValueThatNeedsEscapingGoesThroughTheEncoder() throws {
        let answer = PhoneResetController.StatusAnswer(Self.request(.pending, id: #"a"b\c"#))
        #expect(answer.plainJSON == nil)
        #expect(JSONText.needsNoEscaping("AZaz09-_:.+ /"))
        for text in ["\"", "\\", "\n", "\u{7F}", "é"] { #expect(!JSONText.needsNoEscaping(text), "\(text)") }
    }
}
