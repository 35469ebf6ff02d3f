import CountersignRuntime
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve`'s check that it can listen, run before the database is opened.
@Suite struct ListenCheckTests {
    /// A client that connects to `host`:`port` in a loop on a thread of its own, counting the
    /// connections completed. Its sockets are bound to 127.0.0.2 first: a socket that takes
    /// its address from `connect` holds the next ephemeral port of 127.0.0.1, and a loop of
    /// them runs through all of them in a moment, in the way of every bind in the test process.
    final class Connector: Sendable {
        let host: String
        let port: Int
        let stop = Atomic<Bool>(false)
        let attempts = Atomic<Int>(0)
        let completed = Atomic<Int>(0)

        init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        func run() {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr(host)
            var source = sockaddr_in()
            source.sin_family = sa_family_t(AF_INET)
            source.sin_addr.s_addr = inet_addr("127.0.0.2")
            while !stop.load(ordering: .relaxed) {
                let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                guard descriptor >= 0 else { continue }
                let bound = withUnsafePointer(to: &source) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                guard bound == 0 else {
                    close(descriptor)
                    continue
                }
                let result = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                if result == 0 { completed.add(1, ordering: .relaxed) }
                attempts.add(1, ordering: .relaxed)
                close(descriptor)
            }
        }
    }

    #if os(Linux)
    static let onLinux = true
    #else
    static let onLinux = false
    #endif

    /// The check binds and never listens: a client connecting over and over while
    /// the check runs again and again is refused every time. (A check that listened,
    /// even for a moment, completed connections that nothing then read or closed: a
    /// health check sent as the daemon started waited for good.)
    /// (Linux: the client's address, 127.0.0.2, is there without configuration.) The checks are
    /// for 127.0.0.3, where no other test listens: the other tests' servers take ports of
    /// 127.0.0.1 while the checks run, and one of them may take this port.
    @Test(.enabled(if: Self.onLinux), .timeLimit(.minutes(5))) func theCheckNeverTakesAConnection() async throws {
        let host = "127.0.0.3"
        let port = unusedPort()
        let connector = Connector(host: host, port: port)
        let thread = Thread { connector.run() }
        thread.start()
        defer { connector.stop.store(true, ordering: .relaxed) }
        // The client is under way before the checks start (a hang detector bounds the wait).
        let clock = ContinuousClock()
        let started = clock.now
        while connector.attempts.load(ordering: .relaxed) == 0, clock.now - started < .seconds(60) { try await Task.sleep(for: .milliseconds(1)) }
        let before = connector.attempts.load(ordering: .relaxed)
        // At least 300 checks, and on until the client made 300 attempts among them: on a busy machine
        // its thread may not run at all while 300 checks go by.
        var checks = 0
        while checks < 300 || connector.attempts.load(ordering: .relaxed) - before < 300, clock.now - started < .seconds(120) {
            try await ListenCheck.ensureFree(ListenAddress(host: host, port: port), what: "--listen")
            checks += 1
        }
        let during = connector.attempts.load(ordering: .relaxed) - before
        connector.stop.store(true, ordering: .relaxed)
        #expect(during > 0, "the client ran while the checks did")
        #expect(connector.completed.load(ordering: .relaxed) == 0, "connections completed during \(during) attempts")
    }

    /// Where another socket listens, the check names the address and the system's reason.
    @Test func anAddressInUseIsNamed() async throws {
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(listener.localAddress?.port)
        await #expect(throws: ConfigurationError.self) {
            try await ListenCheck.ensureFree(ListenAddress(host: "127.0.0.1", port: port), what: "--listen")
        }
        do {
            try await ListenCheck.ensureFree(ListenAddress(host: "127.0.0.1", port: port), what: "--listen")
        } catch let error as ConfigurationError {
            #expect(error.description == "cannot listen on 127.0.0.1:\(port) (--listen): Address already in use")
        }
        try await listener.close().get()
    }

    /// An address in use is tried again after a pause, up to the attempts given: one freed meanwhile is taken, one
    /// still held is refused after the last try, and any other failure is refused at once.
    @Test func anAddressInUseIsTriedAgainAndOneFreedMeanwhileIsTaken() async throws {
        // A plain listening socket, closed by the pause itself: nothing stands between the close and
        // the next try. Its port is outside the ephemeral range, where the suite's own outgoing
        // connections could take it once freed.
        let port = unusedPort()
        let listener = try Self.listen(port: port)
        let pauses = Atomic<Int>(0)
        // Held throughout: five tries, four pauses, then the refusal.
        await #expect(throws: ConfigurationError.self) {
            try await ListenCheck.ensureFree(ListenAddress(host: "127.0.0.1", port: port), what: "--listen", attempts: 5) {
                pauses.add(1, ordering: .relaxed)
            }
        }
        #expect(pauses.load(ordering: .relaxed) == 4)
        // Freed during the first pause: the second try binds.
        pauses.store(0, ordering: .relaxed)
        try await ListenCheck.ensureFree(ListenAddress(host: "127.0.0.1", port: port), what: "--listen", attempts: 5) {
            if pauses.add(1, ordering: .relaxed).newValue == 1 { close(listener) }
        }
        #expect(pauses.load(ordering: .relaxed) == 1)
        // Not an address in use (not on this host): no second try.
        pauses.store(0, ordering: .relaxed)
        await #expect(throws: ConfigurationError.self) {
            try await ListenCheck.ensureFree(ListenAddress(host: "192.0.2.1", port: 8080), what: "--listen", attempts: 5) {
                pauses.add(1, ordering: .relaxed)
            }
        }
        #expect(pauses.load(ordering: .relaxed) == 0)
    }

    /// A TCP socket listening on 127.0.0.1:`port` (its descriptor).
    static func listen(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EBADF) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(descriptor, 8) == 0 else {
            close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        return descriptor
    }

}
