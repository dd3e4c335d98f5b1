import { IsIn, IsString, Matches, MaxLength, MinLength } from 'class-validator';

/** Body of `POST /orders`. The order reference is the idempotency key of the run. */
export class CreateOrderDto {
  @Matches(/^PO-\d{4}-\d{4,}$/, { message: 'orderRef must look like PO-2026-0041' })
  orderRef!: string;

  @IsIn(['portal', 'email', 'edi'])
  channel!: 'portal' | 'email' | 'edi';

  @IsString()
  @MinLength(10)
  @MaxLength(20_000)
  text!: string;
}
