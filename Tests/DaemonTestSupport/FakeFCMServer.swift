import FakeFCM
import Foundation
import TestSupport

/// A ``FakeFCM`` served on 127.0.0.1 for the duration of `body`, with a service-account file for it.
enum FakeFCMServer {
    static func run<T: Sendable>(
        folder: TemporaryFolder,
        _ body: @Sendable (FakeFCM, _ base: String, _ serviceAccountFile: String) async throws -> T
    ) async throws -> T {
        let fake = try await FakeFCM()
        return try await fake.serve { base in
            let file = folder.url.appendingPathComponent("fcm-service-account.json").path
            try fake.serviceAccountJSON(base: base).write(to: URL(fileURLWithPath: file))
            return try await body(fake, base, file)
        }
    }
}
