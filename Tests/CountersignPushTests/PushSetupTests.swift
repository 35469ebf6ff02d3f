import AsyncHTTPClient
import CountersignCore
import FakeFCM
import Foundation
import Logging
import TestSupport
import Testing

@testable import CountersignPush

/// Which client FCM sends take, as the daemon sets it up.
@Suite struct PushSetupTests {
    /// FCM at an https address (as Google's): sends go over ``HTTP2PushClient`` and reach the strict fake whole.
    @Test(.timeLimit(.minutes(5))) func sendsToAnHTTPSEndpointGoOverTheFrameClient() async throws {
        let folder = try makeTemporaryFolder("push-setup")
        defer { try? FileManager.default.removeItem(at: folder) }
        let certificate = try TestCertificate()
        let caFile = try certificate.caFile(in: folder)
        let fake = try await FakeFCM()
        try await fake.serve(tls: try certificate.serverConfiguration()) { base in
            let accountFile = folder.appendingPathComponent("account.json").path
            try fake.serviceAccountJSON(base: base).write(to: URL(fileURLWithPath: accountFile))
            let configuration = PushConfiguration(serviceAccountFile: accountFile, endpoint: base, caFile: caFile)
            let made = try await PushSetup.makeFCM(
                configuration: configuration, deadTokens: FakeFCMHarness.DeadTokens(), logger: Logger(label: "push-setup-test"))
            let (sender, service) = try #require(made)
            let streams = try #require(sender.streams)
            let outcome = await sender.send(
                FakeFCMHarness.prompt(), to: FakeFCMHarness.device("token-https"), logger: Logger(label: "push-setup-test"))
            #expect(outcome == .sent)
            // Sent through the frame client and accepted whole. (Once or more: under a loaded suite its answer has
            // outlasted the daemon's 10 s request timeout, and the send was made again, as it is in production.)
            #expect(Set(fake.received.map(\.token)) == ["token-https"])
            #expect(fake.rejections.isEmpty)
            #expect(streams.openConnections == 1)
            #expect(sender.connectionCount == 1, "only the token exchange's client")
            try await service.shutdown()
            try await sender.shutdownOpenedConnections()
            #expect(streams.openConnections == 0)
        }
    }

    /// A plain-HTTP endpoint (a local fake) keeps AsyncHTTPClient.
    @Test func anHTTPEndpointKeepsTheHTTPClient() async throws {
        let folder = try makeTemporaryFolder("push-setup")
        defer { try? FileManager.default.removeItem(at: folder) }
        let fake = try await FakeFCM()
        try await fake.serve { base in
            let accountFile = folder.appendingPathComponent("account.json").path
            try fake.serviceAccountJSON(base: base).write(to: URL(fileURLWithPath: accountFile))
            let configuration = PushConfiguration(serviceAccountFile: accountFile, endpoint: base)
            let made = try await PushSetup.makeFCM(
                configuration: configuration, deadTokens: FakeFCMHarness.DeadTokens(), logger: Logger(label: "push-setup-test"))
            let (sender, service) = try #require(made)
            #expect(sender.streams == nil)
            #expect(await sender.send(FakeFCMHarness.prompt(), to: FakeFCMHarness.device("token-http"), logger: Logger(label: "t")) == .sent)
            try await sender.shutdownOpenedConnections()
            try await service.shutdown()
        }
    }
}
