// swift-tools-version:6.0
import PackageDescription

// The phone's side of Countersign, as a package of its own: what an iOS app
// (or a command-line device) ships. It depends on swift-crypto alone — no
// SwiftNIO, no server code — and talks HTTP through URLSession (or any
// transport the app gives it).
//
// Platform floor: CryptoKit's HPKE, which swift-crypto uses on Apple
// platforms and which opens sealed pushes, first shipped in iOS 17, macOS 14,
// tvOS 17, watchOS 10 and visionOS 1. The library's own code needs no more
// than iOS 16 (`Duration`, `ContinuousClock`).
let package = Package(
    name: "countersign-device",
    platforms: [.iOS(.v17), .macOS(.v14), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    products: [
        // Sign in or enroll, answer signed (through a `DeviceSigner` that may keep its key
        // in a Secure Enclave), offline codes, push notices (sealed ones opened).
        .library(name: "CountersignDevice", targets: ["CountersignDevice"]),
        // The formats the daemon and the device both speak: sealed pushes, offline codes, base64url.
        .library(name: "CountersignWire", targets: ["CountersignWire"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2")
    ],
    targets: [
        .target(
            name: "CountersignWire",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")]
        ),
        .target(
            name: "CountersignDevice",
            dependencies: ["CountersignWire", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(
            name: "CountersignDeviceTests",
            dependencies: ["CountersignDevice", "CountersignWire", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // The Swift snippets of docs/phone-app.md, compiled and run (scripts/check-doc-snippets.py
        // checks that each snippet in the document is here word for word).
        .testTarget(
            name: "PhoneAppSnippets",
            dependencies: ["CountersignDevice", "CountersignWire", .product(name: "Crypto", package: "swift-crypto")]
        ),
    ]
)

for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    target.swiftSettings = settings
}
