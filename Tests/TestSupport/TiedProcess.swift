import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A child process that cannot outlive the test process that started it.
///
/// The child is started through `bash`, which keeps the read end of a pipe
/// whose only writer is this process, starts a watcher on it, and then
/// `exec`s the program (same pid, so signals sent to ``processIdentifier``
/// reach the program itself). When the test process ends, however it ends
/// (a crash, `kill -9`, a cancelled CI job), the kernel closes the write end,
/// the watcher reads end-of-file and kills the program with SIGKILL. A
/// watcher whose program has already exited finds it is no longer the
/// program's child and kills nothing.
public final class TiedProcess: Sendable {
    public let processIdentifier: Int32
    /// The write end of the watcher's pipe; closed once the program has been waited for.
    private let tie: Int32
    /// Kept while the program runs: its reader (a readability handler, say) lives as long as the pipe.
    private let keptPipe: Pipe?
    private struct State {
        /// The raw `waitpid` status, once reaped.
        var status: Int32?
        var tieOpen = true
    }
    private let state = Mutex(State())

    /// The watcher, then the program with the watcher's pipe closed. The
    /// watcher keeps no other descriptor, and the program gets only its
    /// standard three: descriptors of the test process that are not
    /// close-on-exec (other tests' pipes) stay out of it.
    public static let launcher = #"""
        exec 3<&0 </dev/null
        program=$$
        {
          for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 3 ]; then eval "exec $fd>&-"; fi
          done
          while IFS= read -r _ <&3; do :; done
          read -r _ _ _ parent _ < "/proc/$BASHPID/stat"
          if [ "$parent" = "$program" ]; then kill -KILL "$program"; fi
        } >/dev/null 2>&1 &
        for fd in /proc/$$/fd/*; do
          fd=${fd##*/}
          if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null; fi
        done
        exec "$0" "$@"
        """#

    /// Starts `executable` with `arguments`; standard input is `/dev/null`.
    /// Launched with `posix_spawn`, not Foundation's `Process`: that one's
    /// launch crashed now and then in the test process (a copy on a bad
    /// pointer inside `Process.run()`), with or without a lock around it.
    /// The watcher ends when the program has ended and ``waitUntilExit()`` or
    /// ``stop()`` was called (or this object is gone).
    public init(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, output: FileHandle? = nil,
        error: FileHandle? = nil, pipe: Pipe? = nil
    ) throws {
        var ends: [Int32] = [0, 0]
        guard Glibc.pipe(&ends) == 0 else { throw RunError("pipe() failed: \(errno)") }
        // Neither end leaks into other children; the child gets the read end as its standard input.
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer {
            close(ends[0])
            if devNull >= 0 { close(devNull) }
        }
        let out = pipe?.fileHandleForWriting.fileDescriptor ?? output?.fileDescriptor ?? devNull
        let err = pipe?.fileHandleForWriting.fileDescriptor ?? error?.fileDescriptor ?? output?.fileDescriptor ?? devNull
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[0], 0)
        posix_spawn_file_actions_adddup2(&actions, out, 1)
        posix_spawn_file_actions_adddup2(&actions, err, 2)
        let words = ["/bin/bash", "-c", Self.launcher, executable.path] + arguments
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup($0) } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        // The program starts as a login would: no signal blocked (the test's
        // threads block some), and SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE
        // at their defaults, so a test's signal reaches it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, &attributes, argv, envp)
        guard spawned == 0 else {
            close(ends[1])
            throw RunError("cannot start \(executable.path): error \(spawned)")
        }
        processIdentifier = pid
        tie = ends[1]
        keptPipe = pipe
        // The child has its copy: the reader of the pipe sees end-of-file when the program ends.
        if let pipe { try? pipe.fileHandleForWriting.close() }
    }

    deinit { closeTie() }

    private func closeTie() {
        let open = state.withLock { state in
            defer { state.tieOpen = false }
            return state.tieOpen
        }
        if open { close(tie) }
    }

    /// Reaps the program if it has ended (blocking: until it has); its raw status.
    @discardableResult
    private func reap(blocking: Bool) -> Int32? {
        if let status = state.withLock({ $0.status }) { return status }
        var status: Int32 = 0
        while true {
            let result = waitpid(processIdentifier, &status, blocking ? 0 : WNOHANG)
            if result == processIdentifier {
                state.withLock { $0.status = status }
                return status
            }
            if result == 0 { return nil }
            if errno == EINTR { continue }
            // Reaped by another caller meanwhile.
            return state.withLock { $0.status }
        }
    }

    public var isRunning: Bool { reap(blocking: false) == nil }

    /// The exit status, or the signal that ended it.
    public var terminationStatus: Int32 {
        let status = reap(blocking: false) ?? 0
        return status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
    }

    public var terminationReason: Process.TerminationReason {
        (reap(blocking: false) ?? 0) & 0x7f == 0 ? .exit : .uncaughtSignal
    }

    /// Sends `signal` to the program.
    public func signal(_ signal: Int32) { kill(processIdentifier, signal) }

    /// Waits for the program to end, and lets its watcher go.
    public func waitUntilExit() {
        reap(blocking: true)
        closeTie()
    }

    /// SIGKILL if it still runs, then waits: for `defer` blocks.
    public func stop() {
        if isRunning { kill(processIdentifier, SIGKILL) }
        waitUntilExit()
    }
}

extension TiedProcess {
    /// Waits up to `limit` for the program to end; whether it did. The limit
    /// turns a hang into a failure; it is no measure of speed.
    public func exit(within limit: Duration) async throws -> Bool {
        let clock = ContinuousClock()
        let start = clock.now
        while isRunning {
            guard clock.now - start < limit else { return false }
            try await Task.sleep(for: .milliseconds(20))
        }
        waitUntilExit()
        return true
    }
}

/// Runs blocking work (a child process waited for, say) on a thread of its
/// own, so that it does not hold one of the few threads every test's tasks
/// share: in-process servers the child talks to need those threads to answer.
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// Runs a command to its end without Foundation's `Process` (whose launch
/// crashed now and then in a test process with many threads and descriptors,
/// lock or not): `posix_spawn` of `/bin/sh`, input and output through files,
/// `waitpid`. Its exit status (128 + the signal for a killed one) and output
/// (standard output and error). Blocking: call it on a thread of its own.
public func runToEnd(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:], input: String? = nil
) throws -> (status: Int32, output: String) {
    let folder = FileManager.default.temporaryDirectory
    let output = folder.appendingPathComponent("countersign-run-\(UUID().uuidString).out")
    let inputFile = folder.appendingPathComponent("countersign-run-\(UUID().uuidString).in")
    defer {
        try? FileManager.default.removeItem(at: output)
        try? FileManager.default.removeItem(at: inputFile)
    }
    try Data((input ?? "").utf8).write(to: inputFile)
    let command =
        ([executable] + arguments).map(shellQuoted).joined(separator: " ")
        + " <\(shellQuoted(inputFile.path)) >\(shellQuoted(output.path)) 2>&1"
    let variables = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
    let words: [String] = ["/bin/sh", "-c", command]
    let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
    let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup($0) } + [nil]
    defer { for pointer in argv + envp { free(pointer) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, "/bin/sh", nil, nil, argv, envp)
    guard spawned == 0 else { throw RunError("cannot run \(executable): error \(spawned)") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    return (exitStatus, (try? String(contentsOf: output, encoding: .utf8)) ?? "")
}

/// `word` quoted for `/bin/sh`.
public func shellQuoted(_ word: String) -> String {
    "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

public struct RunError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
