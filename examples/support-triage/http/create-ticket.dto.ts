import { IsEmail, IsString, Matches, MaxLength, MinLength } from 'class-validator';

/** Body of `POST /tickets`. The ticket id is the idempotency key of the run. */
export class CreateTicketDto {
  @Matches(/^T-[\w-]{1,40}$/, { message: 'ticketId must look like T-1042' })
  ticketId!: string;

  @IsEmail()
  from!: string;

  @IsString()
  @MinLength(5)
  @MaxLength(5_000)
  text!: string;
}
