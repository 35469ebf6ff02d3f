import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The admin commands act as the user that owns the daemon's state directory.
///
/// Run by root (`sudo countersign user add …` on a systemd host), a command
/// that opened the database as root would work as root in a folder the
/// network-facing service's user can write, and could leave root-owned files
/// there (a new database made before the first start) that the service then
/// cannot write. So before anything is opened, a root process becomes the
/// owner of the database's folder: that user and group, no supplementary
/// groups. A folder root owns, or a process that is not root, is left as it is.
enum ServiceUser {
    static func become(ownerOf databasePath: String) throws {
        guard geteuid() == 0 else { return }
        let folder = URL(fileURLWithPath: databasePath).deletingLastPathComponent().resolvingSymlinksInPath().path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: folder),
            let owner = (attributes[.ownerAccountID] as? NSNumber)?.uint32Value,
            let group = (attributes[.groupOwnerAccountID] as? NSNumber)?.uint32Value, owner != 0
        else { return }  // Root's own folder, or none (opening the database says so).
        let (uid, gid) = (uid_t(owner), gid_t(group))
        guard setgroups(0, nil) == 0, setgid(gid) == 0, setuid(uid) == 0, getuid() == uid, geteuid() == uid, setuid(0) != 0 else {
            throw CommandFailure("cannot act as \(folder)'s owner (uid \(uid)): \(String(cString: strerror(errno)))")
        }
        guard access(folder, R_OK | W_OK | X_OK) == 0 else {
            throw CommandFailure(
                """
                as \(folder)'s owner (uid \(uid)) the database cannot be reached: \(String(cString: strerror(errno))) \
                (a folder under /var/lib/private belongs to a unit with DynamicUser=; give the unit a User=)
                """)
        }
    }
}
