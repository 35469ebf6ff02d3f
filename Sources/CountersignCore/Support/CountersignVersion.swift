/// The release, in one place: `countersign --version`, the
/// `countersign_build_info{version}` metric and the start-up line all read it.
public enum CountersignVersion {
    public static let current = "0.11.0"
}
