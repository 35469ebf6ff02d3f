import Crypto
import Foundation
import TestSupport
import Testing

/// `countersign push check` and the push settings, through the real binary:
/// APNs credentials against an HTTP/2 server that verifies them, the VAPID
/// key never created by a check, and a half-configured provider refused at start.
@Suite struct PushCheckCommandTests {
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"

    @Test func checkTellsAcceptedAPNsCredentialsFromRefusedOnes() async throws {
        let folder = try makeTemporaryFolder("countersign-push-check")
        defer { try? FileManager.default.removeItem(at: folder) }
        let keyFile = folder.appendingPathComponent("AuthKey.p8").path
        let otherFile = folder.appendingPathComponent("Other.p8").path
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile))
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: otherFile))
        let server = try await PushTestServer(.apns, folder: folder, apnsKeyFile: keyFile, keyID: Self.keyID, teamID: Self.teamID)
        defer { server.stop() }
        let ca = try #require(server.caFile)
        func check(_ key: String) async throws -> (status: Int32, output: String) {
            try await DaemonProcessTests.command([
                "push", "check", "--provider", "apns", "--apns-key-file", key, "--apns-key-id", Self.keyID, "--apns-team-id", Self.teamID,
                "--apns-url", server.base, "--apns-ca-file", ca, "--apns-topic", "com.example.countersign",
            ])
        }
        let (status, output) = try await check(keyFile)
        #expect(status == 0, "\(output)")
        #expect(output.contains("accepted the provider token"))
        #expect(!output.contains("PRIVATE KEY"))
        let sent = try server.received()
        #expect(sent.count == 1 && sent.first?.jwt?.valid == true && sent.first?.reason == "BadDeviceToken")

        let (refused, said) = try await check(otherFile)
        #expect(refused == 1)
        #expect(said.contains("InvalidProviderToken"), "\(said)")
    }

    @Test func checkReadsTheVAPIDKeyAndNeverCreatesOne() async throws {
        let folder = try makeTemporaryFolder("countersign-push-check")
        defer { try? FileManager.default.removeItem(at: folder) }
        let keyFile = folder.appendingPathComponent("vapid.pem").path
        let arguments = ["push", "check", "--vapid-subject", "mailto:ops@example.com", "--vapid-key-file", keyFile]
        let (missing, said) = try await DaemonProcessTests.command(arguments)
        #expect(missing == 1)
        #expect(said.contains("does not exist"), "\(said)")
        #expect(!FileManager.default.fileExists(atPath: keyFile))

        let key = P256.Signing.PrivateKey()
        try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile))
        let (status, output) = try await DaemonProcessTests.command(arguments)
        #expect(status == 0, "\(output)")
        #expect(output.contains(SecureBase64URL.encode(key.publicKey.x963Representation)))
    }

    @Test func aHalfConfiguredProviderStopsTheStartWithOneLine() async throws {
        let folder = try makeTemporaryFolder("countersign-push-check")
        defer { try? FileManager.default.removeItem(at: folder) }
        let keyFile = folder.appendingPathComponent("AuthKey.p8").path
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile))
        let database = folder.appendingPathComponent("countersign.sqlite").path
        let (status, output) = try await DaemonProcessTests.command([
            "serve", "--database", database, "--listen", "127.0.0.1:0", "--apns-key-file", keyFile, "--apns-team-id", Self.teamID,
        ])
        #expect(status == 78)
        #expect(output.contains("--apns-key-id"), "\(output)")
        let (bad, badSaid) = try await DaemonProcessTests.command([
            "serve", "--database", database, "--listen", "127.0.0.1:0", "--vapid-subject", "ops@example.com",
        ])
        #expect(bad == 78)
        #expect(badSaid.contains("--vapid-subject"), "\(badSaid)")
    }
}

/// Base64url without padding, as the daemon prints keys.
enum SecureBase64URL {
    static func encode(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
