import Foundation

/// The config file's text: JSON, with the comments and trailing commas of
/// JSON5 allowed, so the installed `/etc/countersign/countersign.json` can
/// explain each setting beside it. Foundation's JSON5 decoder reads it; the
/// value is written out again as strict JSON for the settings to be read from.
enum ConfigFileText {
    static func strictJSON(_ data: Data) -> Data? {
        let decoder = JSONDecoder()
        decoder.allowsJSON5 = true
        guard let value = try? decoder.decode(Value.self, from: data) else { return nil }
        return try? JSONEncoder().encode(value)
    }

    private enum Value: Codable {
        case null
        case bool(Bool)
        case integer(Int)
        case number(Double)
        case string(String)
        case array([Value])
        case object([String: Value])

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let bool = try? container.decode(Bool.self) {
                self = .bool(bool)
            } else if let integer = try? container.decode(Int.self) {
                self = .integer(integer)
            } else if let number = try? container.decode(Double.self) {
                self = .number(number)
            } else if let string = try? container.decode(String.self) {
                self = .string(string)
            } else if let array = try? container.decode([Value].self) {
                self = .array(array)
            } else {
                self = .object(try container.decode([String: Value].self))
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .bool(let bool): try container.encode(bool)
            case .integer(let integer): try container.encode(integer)
            case .number(let number): try container.encode(number)
            case .string(let string): try container.encode(string)
            case .array(let array): try container.encode(array)
            case .object(let object): try container.encode(object)
            }
        }
    }
}
