import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The files of the service's database stay the service's when root runs an admin command.
///
/// On a systemd host the operator runs the admin commands as root (`sudo countersign
/// user add …`): under `DynamicUser=` the state directory lies behind
/// `/var/lib/private`, which no other user may enter outside the unit. A file
/// root creates there would be one the service's user cannot write. SQLite, run
/// by root, already gives the `-wal` and `-shm` files it creates to the owner of
/// the database file (even when the command is killed and leaves them behind).
/// What is left is the database itself, when an admin command makes it before
/// the daemon's first start: it is created here, empty, and given to the owner
/// of its folder before SQLite opens it.
enum DatabaseOwnership {
    static func createForFolderOwner(_ databasePath: String) throws {
        guard geteuid() == 0, !FileManager.default.fileExists(atPath: databasePath) else { return }
        let folder = URL(fileURLWithPath: databasePath).deletingLastPathComponent().resolvingSymlinksInPath()
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: folder.path),
            let owner = (attributes[.ownerAccountID] as? NSNumber)?.uint32Value,
            let group = (attributes[.groupOwnerAccountID] as? NSNumber)?.uint32Value, owner != 0
        else { return }  // Root's own folder, or none (opening the database says so).
        let descriptor = open(databasePath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST { return }  // Made meanwhile, by whoever owns it.
            throw CommandFailure("cannot create \(databasePath): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        guard fchown(descriptor, uid_t(owner), gid_t(group)) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(databasePath)
            throw CommandFailure("cannot give \(databasePath) to its folder's owner (uid \(owner)): \(reason)")
        }
    }
}
