import CountersignCore
import Crypto
import Foundation
import Testing

/// push-providers.md: what a device may name as its push address, and how both stores keep it.
@Suite struct PushAddressTests {
    static let key = SecureToken.base64URL(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
    static let auth = SecureToken.base64URL(Data(repeating: 1, count: 16))
    static let token = String(repeating: "a1", count: 32)

    @Test func anAPNsTokenIsHexOfAtLeast64DigitsWithABundleIDAndAnEnvironment() throws {
        let address = try PushAddress.checkedAPNs(token: Self.token.uppercased(), topic: "com.example.app", environment: "sandbox")
        #expect(address.provider == .apns)
        #expect(address.token == Self.token)
        #expect(address.apnsEnvironment == .sandbox)
        #expect(try PushAddress.checkedAPNs(token: Self.token, topic: "com.example.app", environment: nil).apnsEnvironment == .production)
        for (token, topic, environment, field) in [
            ("zz" + Self.token.dropFirst(2), "com.example.app", "production", "token"),
            (String(Self.token.prefix(62)), "com.example.app", "production", "token"),
            (Self.token + "a", "com.example.app", "production", "token"),
            (Self.token, "com example", "production", "topic"),
            (Self.token, "", "production", "topic"),
            (Self.token, "com.example.app", "staging", "environment"),
        ] {
            #expect(throws: PushAddress.Problem.self) { try PushAddress.checkedAPNs(token: token, topic: topic, environment: environment) }
            do {
                _ = try PushAddress.checkedAPNs(token: token, topic: topic, environment: environment)
            } catch {
                #expect(error.field == field)
            }
        }
    }

    @Test func aWebPushSubscriptionNeedsAPublicHTTPSEndpointAP256KeyAndA16ByteSecret() throws {
        let policy = PushEndpointPolicy()
        let address = try PushAddress.checkedWebPush(
            endpoint: "https://ntfy.example.net/upABC?up=1", p256dh: Self.key, auth: Self.auth + "==", policy: policy)
        #expect(address.provider == .webPush)
        #expect(address.webPushKey?.count == 65)
        #expect(address.webPushAuth?.count == 16)
        func field(_ endpoint: String, _ key: String = Self.key, _ auth: String = Self.auth) -> String? {
            do {
                _ = try PushAddress.checkedWebPush(endpoint: endpoint, p256dh: key, auth: auth, policy: policy)
                return nil
            } catch {
                return error.field
            }
        }
        #expect(field("http://ntfy.example.net/up") == "endpoint")
        #expect(field("https://127.0.0.1/up") == "endpoint")
        #expect(field("https://[::1]/up") == "endpoint")
        #expect(field("https://10.1.2.3/up") == "endpoint")
        #expect(field("https://192.168.1.10:8443/up") == "endpoint")
        #expect(field("https://169.254.169.254/latest/meta-data") == "endpoint")
        #expect(field("https://[fd00:ec2::254]/") == "endpoint")
        #expect(field("https://[::ffff:127.0.0.1]/up") == "endpoint")
        #expect(field("https://100.64.0.1/up") == "endpoint")
        #expect(field("https://localhost/up") == "endpoint")
        #expect(field("https://metadata.google.internal/computeMetadata/v1/") == "endpoint")
        #expect(field("https://user:pw@ntfy.example.net/up") == "endpoint")
        #expect(field("ntfy.example.net/up") == "endpoint")
        #expect(field("https://2130706433/up") == "endpoint")
        #expect(field("https://0x7f.1/up") == "endpoint")
        #expect(field("https://127.1/up") == "endpoint")
        #expect(field("https://ntfy.example.net./up") == nil)
        #expect(field("https://localhost./up") == "endpoint")
        #expect(field("https://93.184.215.14/up") == nil)
        // A point not on the curve, a compressed key, a short secret.
        var offCurve = try #require(DeviceKey.decode(Self.key))
        offCurve[64] ^= 1
        #expect(field("https://ntfy.example.net/up", SecureToken.base64URL(offCurve)) == "p256dh")
        #expect(field("https://ntfy.example.net/up", SecureToken.base64URL(Data(count: 33))) == "p256dh")
        #expect(field("https://ntfy.example.net/up", "not base64!") == "p256dh")
        #expect(field("https://ntfy.example.net/up", Self.key, SecureToken.base64URL(Data(count: 15))) == "auth")
        // With private endpoints allowed (tests, closed networks): loopback and http:// pass.
        let open = PushEndpointPolicy(allowsPrivate: true)
        #expect(open.problem("http://127.0.0.1:8080/push/x") == nil)
        #expect(open.problem("ftp://127.0.0.1/x") != nil)
    }

    @Test func theAddressCheckAtSendTimeRefusesPrivateAddresses() throws {
        let policy = PushEndpointPolicy()
        for address in ["127.0.0.1", "10.0.0.8", "172.20.1.1", "169.254.169.254", "::1", "fe80::1", "fc00::5", "0.0.0.0"] {
            #expect(!policy.allows(address: try #require(IPNetwork.address(address))), "\(address)")
        }
        for address in ["93.184.215.14", "2606:4700::1111"] {
            #expect(policy.allows(address: try #require(IPNetwork.address(address))), "\(address)")
        }
        #expect(PushEndpointPolicy(allowsPrivate: true).allows(address: try #require(IPNetwork.address("127.0.0.1"))))
    }

    @Test func anAddressReadsBackAsStored() throws {
        let apns = PushAddress.apns(token: Self.token, topic: "com.example.app", environment: .sandbox)
        let web = try PushAddress.checkedWebPush(
            endpoint: "https://ntfy.example.net/up", p256dh: Self.key, auth: Self.auth, policy: PushEndpointPolicy())
        for address in [PushAddress.fcm("fcm-token"), apns, web] {
            let read = PushAddress(storedProvider: address.provider.rawValue, token: address.token, options: address.storedOptions)
            #expect(read == address)
        }
        #expect(PushAddress.fcm("t").storedOptions == nil)
        #expect(PushAddress(storedProvider: "fcm", token: nil, options: nil) == nil)
        // A row a newer release wrote leaves that device pull only here, and readable.
        #expect(PushAddress(storedProvider: "carrier-pigeon", token: "t", options: nil) == nil)
        #expect(PushAddress(storedProvider: "apns", token: "t", options: "{not json") == nil)
        #expect(web.described == "webpush …net/up")
    }
}
