#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's open-file limit, which bounds the connections it can hold: every long poll holds one. At start the
/// soft limit is raised to the hard one (a login shell's 1,024 would cap a daemon run by hand at about that many
/// polls); a `--long-polls-max` the limit still cannot hold is said in a warning.
public enum OpenFileLimit {
    /// Files the daemon keeps open besides its clients' connections: the database, its pool, the listeners, push
    /// and mail connections, the journal.
    public static let reserve = 1024

    /// Raises the soft limit to the hard one; returns the soft limit in force after.
    @discardableResult
    public static func raise() -> Int {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return Int.max }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// The warning a daemon that may hold `longPolls` polls gets under an open-file limit of `limit`; `nil` when it fits.
    public static func warning(longPolls: Int, limit: Int) -> String? {
        guard longPolls > limit - reserve else { return nil }
        return "--long-polls-max \(longPolls) is more than the open-file limit (\(limit)) can hold with \(reserve) files to spare: "
            + "raise it (LimitNOFILE= in the unit) to \(longPolls + reserve) or more, or lower --long-polls-max"
    }

    #if canImport(Glibc)
    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let resource = RLIMIT_NOFILE
    #endif
}
