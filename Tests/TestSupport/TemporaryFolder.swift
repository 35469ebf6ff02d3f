import Foundation

/// A new, empty folder of its own under the system's temporary directory,
/// named `PREFIX-UUID`; the caller removes it (``withTemporaryFolder(_:_:)`` does).
public func makeTemporaryFolder(_ prefix: String = "countersign") throws -> URL {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder
}

/// Runs `body` with a folder of its own, removed afterwards whether it returns or throws.
public func withTemporaryFolder<T>(_ prefix: String = "countersign", _ body: (URL) async throws -> T) async throws -> T {
    let folder = try makeTemporaryFolder(prefix)
    defer { try? FileManager.default.removeItem(at: folder) }
    return try await body(folder)
}
