import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to the daemon, for what an HTTP client will not do:
/// stay silent, or send half a request.
final class RawConnection {
    private let descriptor: Int32

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            Glibc.close(descriptor)
            throw TestFailure("connect() failed")
        }
    }

    deinit { Glibc.close(descriptor) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Closes the sending side: the server reads the end of the stream, and may still answer.
    func closeWriting() {
        shutdown(descriptor, Int32(SHUT_WR))
    }

    /// Reads until the server closes the connection; returns what it sent and
    /// how long the close took, or `nil` if the connection is still open after `limit`.
    /// The blocking reads run on a thread of their own: the daemon under test
    /// shares the cooperative pool with the test, and must keep answering.
    func waitForClose(limit: Duration) async -> (text: String, after: Duration)? {
        let (text, closedAfter) = await receive(for: limit)
        return closedAfter.map { (text, $0) }
    }

    /// What the server sends within `duration`, whether or not it closes.
    func read(for duration: Duration) async -> String {
        await receive(for: duration).text
    }

    /// What the server sends until `done` holds for all of it, the server
    /// closes, or `limit` passes (a hang detector, not a timing).
    func read(until done: @escaping @Sendable (String) -> Bool, limit: Duration) async -> String {
        let clock = ContinuousClock()
        let start = clock.now
        var text = ""
        while !done(text), clock.now - start < limit {
            let (more, closed) = await receive(for: .milliseconds(100))
            text += more
            if closed != nil { break }
        }
        return text
    }

    /// Reads for `duration` or until the server closes; the close's time, if it closed.
    private func receive(for duration: Duration) async -> (text: String, closedAfter: Duration?) {
        await withCheckedContinuation { continuation in
            let connection = UncheckedBox(self)
            Thread.detachNewThread { continuation.resume(returning: connection.value.blockingReceive(for: duration)) }
        }
    }

    private func blockingReceive(for duration: Duration) -> (text: String, closedAfter: Duration?) {
        let started = ContinuousClock.now
        var timeout = timeval(tv_sec: 0, tv_usec: 50_000)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now - started < duration {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count > 0 { received += buffer[0..<count] }
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return (String(decoding: received, as: UTF8.self), ContinuousClock.now - started)
            }
        }
        return (String(decoding: received, as: UTF8.self), nil)
    }
}

/// Hands the connection to the reading thread; the test does not touch it meanwhile.
private struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
