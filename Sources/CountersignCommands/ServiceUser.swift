import Foundation
import Synchronization

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
/// owner of the database's folder (found through every symbolic link of the
/// path): that user, its primary group (the folder's group when it has no
/// account entry), no supplementary groups. A folder root owns, or a process
/// that is not root, is left as it is.
enum ServiceUser {
    private static let becameOwner = Mutex<String?>(nil)

    /// Said after every failure once the process changed user: a file it cannot read now may be root's.
    static var actingAs: String? { becameOwner.withLock { $0 } }

    static func become(ownerOf databasePath: String) throws {
        guard geteuid() == 0 else { return }
        let file = URL(fileURLWithPath: databasePath)
        let resolved = FileManager.default.fileExists(atPath: file.path) ? file.resolvingSymlinksInPath() : file
        let folder = resolved.deletingLastPathComponent().resolvingSymlinksInPath().path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: folder),
            let owner = (attributes[.ownerAccountID] as? NSNumber)?.uint32Value,
            let folderGroup = (attributes[.groupOwnerAccountID] as? NSNumber)?.uint32Value, owner != 0
        else { return }  // Root's own folder, or none (opening the database says so).
        let uid = uid_t(owner)
        // A command a test runs in-process shares the test's process: changing user there would
        // change it for every test after it, for good. Such a test must run the binary.
        guard !Console.current.isCapturing else {
            throw CommandFailure("a command run in-process does not change its user (\(folder) belongs to uid \(uid)): run the binary")
        }
        let gid = getpwuid(uid).map { $0.pointee.pw_gid } ?? gid_t(folderGroup)
        guard gid != 0 else {
            throw CommandFailure("\(folder) belongs to uid \(uid) with group root: give it the service's group (chown \(uid):GROUP)")
        }
        guard setgroups(0, nil) == 0, setgid(gid) == 0, setuid(uid) == 0 else {
            throw CommandFailure("cannot act as \(folder)'s owner (uid \(uid)): \(String(cString: strerror(errno)))")
        }
        guard getuid() == uid, geteuid() == uid, getgid() == gid, setuid(0) != 0 else {
            throw CommandFailure("cannot act as \(folder)'s owner (uid \(uid)): the process kept root's identity")
        }
        guard access(folder, R_OK | W_OK | X_OK) == 0 else {
            let reason = String(cString: strerror(errno))
            let hint = folder.hasPrefix("/var/lib/private/") ? " (a unit with DynamicUser= owns it: start the unit with User=countersign once)" : ""
            throw CommandFailure("\(folder) cannot be reached as its owner (uid \(uid)): \(reason)\(hint)")
        }
        becameOwner.withLock { $0 = "as uid \(uid), the owner of \(folder)" }
    }
}
