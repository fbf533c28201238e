#pragma once
// The two OpenAI endpoints whose bodies admission judges.
namespace dpgate::admission {

enum class Endpoint { chat_completions, completions };

}  // namespace dpgate::admission
