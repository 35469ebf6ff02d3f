import Foundation

/// A new, empty folder of its own under the system's temporary directory,
/// named `PREFIX-UUID`; the caller removes it (``withTemporaryDirectory(_:_:)`` does).
public func makeTemporaryFolder(_ prefix: String = "countersign") throws -> URL {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder
}

/// Runs `body` with a folder of its own, removed afterwards whether it returns or throws.
public func withTemporaryDirectory<T>(_ prefix: String, _ body: (URL) async throws -> T) async throws -> T {
    let folder = try makeTemporaryFolder(prefix)
    defer { try? FileManager.default.removeItem(at: folder) }
    return try await body(folder)
}

/// A folder of its own per test, with the daemon's database path in it; removed by ``remove()``.
public struct TemporaryFolder: Sendable {
    public let url: URL

    public init() throws {
        url = try makeTemporaryFolder("countersign-test")
    }

    /// Where a test daemon's SQLite database goes.
    public var databasePath: String { url.appendingPathComponent("countersign.sqlite").path }

    public func remove() { try? FileManager.default.removeItem(at: url) }
}

/// Runs `body` with a fresh temporary folder, removed afterwards whatever happens.
public func withTemporaryFolder<T>(_ body: (TemporaryFolder) async throws -> T) async throws -> T {
    let folder = try TemporaryFolder()
    defer { folder.remove() }
    return try await body(folder)
}
