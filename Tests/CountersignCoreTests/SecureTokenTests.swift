import CountersignCore
import Foundation
import Testing

@Suite struct SecureTokenTests {
    @Test func requestIDsCarry128RandomBitsInBase64URL() {
        let ids = (0..<1000).map { _ in SecureToken.requestID() }
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.count == 22 && SecureToken.isWellFormed($0) })
        #expect(SecureToken.apiKey().count == 43)
    }

    @Test func recordIDsAreSixteenBase64URLCharactersNeverBeginningWithADash() {
        // With '-' allowed first, 5,000 ids would hold about 78 such.
        let ids = (0..<5_000).map { _ in SecureToken.recordID() }
        #expect(ids.allSatisfy { $0.count == 16 && SecureToken.isWellFormed($0) && !$0.hasPrefix("-") })
        #expect(Set(ids).count == ids.count)
        #expect(ids.contains { $0.hasPrefix("_") })
    }

    @Test func malformedTokensAreRecognised() {
        #expect(!SecureToken.isWellFormed(""))
        #expect(!SecureToken.isWellFormed("abc def"))
        #expect(!SecureToken.isWellFormed("../etc/passwd"))
        #expect(!SecureToken.isWellFormed(String(repeating: "a", count: 65)))
    }

    @Test func sha256IsTheKnownDigest() {
        #expect(SecureToken.sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SecureToken.sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func base64URLIsRFC4648WithoutPadding() {
        // RFC 4648 §10's vectors, and bytes that standard base64 writes as "+" and "/".
        let vectors: [(String, String)] = [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE")]
        for (text, encoded) in vectors { #expect(SecureToken.base64URL(Array(text.utf8)) == encoded) }
        #expect(SecureToken.base64URL([0xFB, 0xFF]) == "-_8")
        #expect(SecureToken.base64URL([0xFF, 0xEF, 0xBE]) == "_---")
        for count in [1, 7, 8, 9, 12, 16, 31, 32] {
            let token = SecureToken.generate(byteCount: count)
            #expect(token.count == (count * 4 + 2) / 3, "\(count) bytes")
            #expect(SecureToken.isWellFormed(token))
        }
    }

    @Test func numberCodesAreTwoDigitsAndMatchOnlyThemselves() {
        let codes = (0..<500).map { _ in NumberCode.generate() }
        #expect(codes.allSatisfy { Int($0).map { (10...99).contains($0) } == true })
        #expect(Set(codes).count > 50)
        let sealed = NumberCode.seal("47")
        #expect(sealed.hash != "47")
        #expect(NumberCode.matches("47", sealed))
        #expect(!NumberCode.matches("74", sealed))
        #expect(!NumberCode.matches("", sealed))
        // Salted: the same code seals differently.
        #expect(NumberCode.seal("47").hash != sealed.hash)
    }

    @Test func passwordPolicyNamesTheBrokenRule() {
        #expect(PasswordPolicy.violation(of: "1234567") != nil)
        #expect(PasswordPolicy.violation(of: "12345678") == nil)
        #expect(PasswordPolicy.violation(of: String(repeating: "a", count: 72)) == nil)
        #expect(PasswordPolicy.violation(of: String(repeating: "é", count: 37))?.contains("72") == true)
    }
}
