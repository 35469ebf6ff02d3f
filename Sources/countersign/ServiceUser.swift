import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The admin commands act as the user that owns the daemon's SQLite database.
///
/// Run by root (`sudo countersign user add …` on a systemd host), a command
/// that opened the database as root would leave root-owned files in the
/// service's state directory (the `-wal` and `-shm` files, a new database)
/// that the service's own user then cannot write. So before anything is
/// opened, a root process becomes the owner of the database file (of its
/// folder when the file is not made yet): that user and group, no
/// supplementary groups. A database root owns, or a process that is not
/// root, is left as it is.
enum ServiceUser {
    static func become(ownerOf databasePath: String) throws {
        guard geteuid() == 0 else { return }
        let file = URL(fileURLWithPath: databasePath)
        let owned = [file.path, file.deletingLastPathComponent().path].lazy.compactMap { try? FileManager.default.attributesOfItem(atPath: $0) }.first
        guard let owned, let owner = (owned[.ownerAccountID] as? NSNumber)?.uint32Value,
            let group = (owned[.groupOwnerAccountID] as? NSNumber)?.uint32Value
        else {
            return  // Nothing there: opening it says so.
        }
        guard owner != 0 else { return }
        let (uid, gid) = (uid_t(owner), gid_t(group))
        guard setgroups(0, nil) == 0, setgid(gid) == 0, setuid(uid) == 0, getuid() == uid, geteuid() == uid else {
            let reason = String(cString: strerror(errno))
            throw CommandFailure("cannot act as \(file.path)'s owner (uid \(uid)): \(reason)")
        }
    }
}
