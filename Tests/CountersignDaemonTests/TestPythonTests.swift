import Foundation
import TestSupport
import Testing

/// `swift test` needs no `pip` step of the reader's: the tests' Python is a virtual environment
/// under `.build/` made from the pinned `requirements-test.txt`, and where it cannot be made the
/// reason comes on one line.
@Suite struct TestPythonTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func theTestsPythonIsTheVirtualEnvironmentOfThePinnedRequirements() async throws {
        let python = try await TestPython.path()
        #expect(python == Self.root.appendingPathComponent(".build/test-venv/bin/python").path)
        // Every package the file pins is installed at its pinned version.
        let script = """
            import importlib.metadata, sys
            wrong = []
            for line in open(sys.argv[1]):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                name, version = line.split("==")
                if importlib.metadata.version(name) != version:
                    wrong.append(line)
            print(" ".join(wrong) or "ok")
            """
        let requirements = Self.root.appendingPathComponent("requirements-test.txt").path
        let (status, output) = try await onOwnThread { try runToEnd(python, ["-c", script, requirements]) }
        #expect(status == 0 && output.trimmingCharacters(in: .whitespacesAndNewlines) == "ok", "\(output)")
        // Asked again (another test process), it is found as it is, not made again.
        let (again, said) = try await onOwnThread { try runToEnd("/bin/sh", [Self.root.appendingPathComponent("scripts/test-venv.sh").path]) }
        #expect(again == 0 && said == python + "\n", "\(said)")
    }

    @Test func anIndexThatCannotBeReachedFailsOnOneLine() async throws {
        try await withTemporaryFolder { folder in
            let scripts = folder.url.appendingPathComponent("scripts")
            try FileManager.default.createDirectory(at: scripts, withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                at: Self.root.appendingPathComponent("scripts/test-venv.sh"), to: scripts.appendingPathComponent("test-venv.sh"))
            try Data("standardwebhooks==1.1.0\n".utf8).write(to: folder.url.appendingPathComponent("requirements-test.txt"))
            let port = unusedPort()
            let (status, output) = try await onOwnThread {
                try runToEnd(
                    "/bin/sh", [scripts.appendingPathComponent("test-venv.sh").path],
                    environment: ["PIP_INDEX_URL": "http://127.0.0.1:\(port)/simple", "PIP_NO_CACHE_DIR": "1", "PIP_RETRIES": "0"])
            }
            #expect(status == 1, "\(output)")
            let lines = output.split(separator: "\n")
            #expect(lines.count == 1, "\(output)")
            #expect(output.hasPrefix("test-venv: could not install requirements-test.txt into .build/test-venv (is PyPI reachable?)"), "\(output)")
            // Nothing half-made is left to be taken for a finished one.
            #expect(!FileManager.default.fileExists(atPath: folder.url.appendingPathComponent(".build/test-venv").path))
        }
    }
}
